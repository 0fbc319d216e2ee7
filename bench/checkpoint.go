package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/checkpoint"
)

// checkpointBench is what `berth bench --checkpoint-files N` reports.
type checkpointBench struct {
	Machine string `json:"machine"`
	Files   int    `json:"files"`
	Rounds  int    `json:"rounds"`
	// FirstMs is the first checkpoint (every file read and stored).
	FirstMs float64 `json:"checkpoint_first_ms"`
	// OneChangedP50Ms/P99Ms: a checkpoint after one file changed.
	OneChangedP50Ms float64 `json:"checkpoint_one_changed_p50_ms"`
	OneChangedP99Ms float64 `json:"checkpoint_one_changed_p99_ms"`
	// CaptureP50Ms is the part the agent's prompt waits for: the walk and
	// the changed file's copy (the fsyncs and the manifest follow while
	// the agent works).
	CaptureP50Ms float64 `json:"checkpoint_one_changed_capture_p50_ms"`
	// OneChangedCPUMs is the process's CPU time (user+sys) per such
	// checkpoint, which the machine's load moves less than wall time.
	OneChangedCPUMs float64 `json:"checkpoint_one_changed_cpu_ms"`
	// WarmTakeP50Ms/P99Ms: what the prompt waits for when the checkpoint
	// was taken ahead (checkpoint.Warm) and nothing changed since;
	// WarmMs the warm capture itself, taken after one file changed.
	WarmTakeP50Ms float64 `json:"checkpoint_warm_take_p50_ms"`
	WarmTakeP99Ms float64 `json:"checkpoint_warm_take_p99_ms"`
	WarmP50Ms     float64 `json:"checkpoint_warm_p50_ms"`
	// RewindP50Ms: a rewind that undoes one changed file.
	RewindP50Ms float64 `json:"rewind_one_changed_p50_ms"`
	// StoreBytes is the checkpoint store's size on disk after every round.
	StoreBytes int64 `json:"store_bytes"`
}

// runCheckpointBench times checkpoints of a workspace of n small files in
// 100 directories: the first one, then rounds of one file changed and
// checkpointed (aiming at 50 ms each), then rewinds of one change.
func runCheckpointBench(ctx context.Context, n, rounds int, asJSON bool, out, progress io.Writer) error {
	root, err := os.MkdirTemp("", "berth-bench-ckpt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ws := filepath.Join(root, "ws")
	fmt.Fprintf(progress, "writing a workspace of %d files…\n", n)
	if err := fillWorkspace(ws, n); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("*.o\nbuild/\nnode_modules/\n"), 0o644); err != nil {
		return err
	}
	st := checkpoint.New(filepath.Join(root, "checkpoints"), checkpoint.Options{})
	res := checkpointBench{Machine: machine(), Files: n, Rounds: rounds}
	t0 := time.Now()
	first, err := st.Create(ctx, "ses_bench", "turn_0", ws)
	if err != nil {
		return err
	}
	res.FirstMs = ms(time.Since(t0))
	fmt.Fprintf(progress, "first checkpoint: %d files in %.1f ms; %d rounds of one change…\n", first.Files, res.FirstMs, rounds)
	var took, captured []time.Duration
	var ids []string
	cpu0 := cpuTime()
	for r := range rounds {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", r%100), fmt.Sprintf("f%05d.go", r))
		if err := os.WriteFile(p, fmt.Appendf(nil, "package d\n\n// round %d\n", r), 0o644); err != nil {
			return err
		}
		t := time.Now()
		pend, err := st.Capture(ctx, "ses_bench", fmt.Sprintf("turn_%d", r+1), ws)
		if err != nil {
			return err
		}
		captured = append(captured, time.Since(t))
		c, err := pend.Commit()
		if err != nil {
			return err
		}
		took = append(took, time.Since(t))
		ids = append(ids, c.ID)
	}
	res.OneChangedCPUMs = ms(cpuTime()-cpu0) / float64(max(rounds, 1))
	res.OneChangedP50Ms, res.OneChangedP99Ms = pct(took, 50), pct(took, 99)
	res.CaptureP50Ms = pct(captured, 50)
	if err := benchWarm(ctx, st, ws, rounds, &res); err != nil {
		return err
	}
	defer st.Close()
	var rewinds []time.Duration
	for r := range min(rounds, 10) {
		p := filepath.Join(ws, "d00", "f00000.go")
		if err := os.WriteFile(p, fmt.Appendf(nil, "changed %d\n", r), 0o644); err != nil {
			return err
		}
		t := time.Now()
		if _, err := st.Restore(ctx, "ses_bench", ids[len(ids)-1], ws); err != nil {
			return err
		}
		rewinds = append(rewinds, time.Since(t))
	}
	res.RewindP50Ms = pct(rewinds, 50)
	_ = filepath.WalkDir(filepath.Join(root, "checkpoints"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				res.StoreBytes += fi.Size()
			}
		}
		return nil
	})
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	fmt.Fprintf(out, "checkpoint of %d files: first %.1f ms; one changed p50 %.2f ms p99 %.2f ms (CPU %.2f ms; a capture on the prompt's path, p50 %.2f ms); taken ahead p50 %.2f ms, then taken by the turn p50 %.3f ms p99 %.3f ms; rewind of one change p50 %.2f ms; store %d bytes after %d rounds\n",
		n, res.FirstMs, res.OneChangedP50Ms, res.OneChangedP99Ms, res.OneChangedCPUMs, res.CaptureP50Ms, res.WarmP50Ms, res.WarmTakeP50Ms, res.WarmTakeP99Ms, res.RewindP50Ms, res.StoreBytes, rounds)
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchWarm times rounds of one file changed, the checkpoint taken ahead
// (the turn before ends), then taken by the turn and committed.
func benchWarm(ctx context.Context, st *checkpoint.Store, ws string, rounds int, res *checkpointBench) error {
	var warmed, taken []time.Duration
	for r := range rounds {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", r%100), fmt.Sprintf("f%05d.go", r))
		if err := os.WriteFile(p, fmt.Appendf(nil, "package d\n\n// warm round %d\n", r), 0o644); err != nil {
			return err
		}
		t := time.Now()
		wm, err := st.WarmIn(ctx, "ses_bench", "ses_bench", ws)
		if err != nil {
			return err
		}
		warmed = append(warmed, time.Since(t))
		t = time.Now()
		pend, ok := wm.Take(fmt.Sprintf("turn_w%d", r))
		taken = append(taken, time.Since(t))
		wm.Close()
		if !ok {
			return fmt.Errorf("the checkpoint taken ahead of round %d is stale", r)
		}
		if _, err := pend.Commit(); err != nil {
			return err
		}
	}
	res.WarmP50Ms, res.WarmTakeP50Ms, res.WarmTakeP99Ms = pct(warmed, 50), pct(taken, 50), pct(taken, 99)
	return nil
}

// fillWorkspace writes n small source files into ws, in 100 directories.
func fillWorkspace(ws string, n int) error {
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.go", i))
		if i < 100 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "package d\n\n// file %d\nvar X%d = %d\n", i, i, i), 0o644); err != nil {
			return err
		}
	}
	return nil
}
