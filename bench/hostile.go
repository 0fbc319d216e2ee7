package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/config"
)

// hostileResult is what bench measures of one turn of an agent that
// floods its output far past [limits] max_turn_output: what the daemon (a
// `berth serve` process of its own) and its home pay for it.
type hostileResult struct {
	Machine string `json:"machine"`
	Sandbox string `json:"sandbox"`
	// FloodBytes is what the agent wrote, in Chunks chunks of ChunkBytes.
	FloodBytes int64 `json:"flood_bytes"`
	ChunkBytes int   `json:"chunk_bytes"`
	Chunks     int   `json:"chunks"`
	// MaxTurnOutput is the cap in force.
	MaxTurnOutput int64 `json:"max_turn_output"`
	// DaemonRSSBeforeKB is the daemon's resident memory before the turn,
	// DaemonTurnHWMKB its peak over the turn, DaemonHWMKB over the turn
	// and the reads of it after (?wait=true, the transcript).
	DaemonRSSBeforeKB int64 `json:"daemon_rss_before_kb"`
	DaemonTurnHWMKB   int64 `json:"daemon_turn_hwm_kb"`
	DaemonHWMKB       int64 `json:"daemon_hwm_kb"`
	// StoreGrowthBytes is how much berth.db grew, WALBytes the size of its
	// write-ahead log after (SQLite reuses it; it does not grow with the
	// log).
	StoreGrowthBytes int64 `json:"store_growth_bytes"`
	WALBytes         int64 `json:"wal_bytes"`
	// SpoolPeakBytes is the most disk the shim's spool took at once,
	// SpoolSizeBytes all it ever spooled (punched space included).
	SpoolPeakBytes int64 `json:"spool_peak_bytes"`
	SpoolSizeBytes int64 `json:"spool_size_bytes"`
	// WaitTextBytes and TranscriptTextBytes are the text ?wait=true and
	// the transcript answered for the turn.
	WaitTextBytes       int   `json:"wait_text_bytes"`
	TranscriptTextBytes int   `json:"transcript_text_bytes"`
	DroppedBytes        int64 `json:"dropped_bytes"`
	// TurnSeconds is the turn through berth; DirectSeconds the same flood
	// from the agent started and prompted directly, read and discarded.
	TurnSeconds   float64 `json:"turn_seconds"`
	DirectSeconds float64 `json:"direct_seconds"`
	LoadAverage   float64 `json:"load_average"`
}

// runHostileBench runs one turn of the demo agent writing total bytes in
// chunks of chunk bytes, in a `berth serve` of its own, and reports what
// it cost the daemon; then the same flood from the agent run directly.
func runHostileBench(ctx context.Context, o benchBootOptions, total int64, chunk int, asJSON bool, out, progress io.Writer) error {
	home, err := os.MkdirTemp("", "berth-bench-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	srv, err := serveHealthy(ctx, o, home)
	if err != nil {
		return err
	}
	defer func() { _ = srv.stop(30 * time.Second) }()
	c := srv.c
	s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: o.sandbox})
	if err != nil {
		return err
	}
	if s.State != berth.StateActive {
		return fmt.Errorf("bench session %s did not start: %v", s.ID, s.Failure)
	}
	n := int(total / int64(chunk))
	res := hostileResult{Machine: machine(), Sandbox: o.sandbox, FloodBytes: int64(n) * int64(chunk), ChunkBytes: chunk, Chunks: n,
		MaxTurnOutput: int64(config.Default().Limits.MaxTurnOutput), LoadAverage: loadAverage()}
	pid := srv.cmd.Process.Pid
	st, err := procStatus(pid)
	if err != nil {
		return err
	}
	res.DaemonRSSBeforeKB = st["VmRSS"]
	dbBefore := fileSize(filepath.Join(home, "berth.db"))

	// The spool is sampled while the turn runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			peak, size := spoolBytes(filepath.Join(home, "run"))
			res.SpoolPeakBytes, res.SpoolSizeBytes = max(res.SpoolPeakBytes, peak), max(res.SpoolSizeBytes, size)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	fmt.Fprintf(progress, "one turn of %d chunks of %d bytes through berth…\n", n, chunk)
	t0 := time.Now()
	started, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: fmt.Sprintf("flood %d %d", n, chunk)})
	if err != nil {
		return err
	}
	if err := waitIdle(ctx, c, s.ID); err != nil {
		return err
	}
	res.TurnSeconds = time.Since(t0).Seconds()
	close(stop)
	wg.Wait()
	if st, err = procStatus(pid); err != nil {
		return err
	}
	res.DaemonTurnHWMKB = st["VmHWM"]
	turn, err := c.WaitTurn(ctx, s.ID, started.TurnID)
	if err != nil {
		return err
	}
	res.WaitTextBytes = len(turn.Text)
	turns, err := c.Transcript(ctx, s.ID)
	if err != nil {
		return err
	}
	for _, t := range turns {
		if t.TurnID == turn.TurnID {
			res.TranscriptTextBytes = len(t.Text)
		}
	}
	warns, err := c.ListEvents(ctx, s.ID, berth.EventFilter{Type: berth.EventRuntimeWarning, TurnID: turn.TurnID})
	if err != nil {
		return err
	}
	for _, w := range warns {
		var d struct {
			Reason  string `json:"reason"`
			Dropped int64  `json:"dropped_bytes"`
		}
		if json.Unmarshal(w.Data, &d) == nil && d.Reason == "output_truncated" {
			res.DroppedBytes = d.Dropped
		}
	}
	if st, err = procStatus(pid); err != nil {
		return err
	}
	res.DaemonHWMKB = st["VmHWM"]
	res.StoreGrowthBytes = fileSize(filepath.Join(home, "berth.db")) - dbBefore
	res.WALBytes = fileSize(filepath.Join(home, "berth.db-wal"))

	fmt.Fprintf(progress, "the same flood from the agent run directly…\n")
	spec := berth.AgentSpec{Name: "demo", Command: o.binaryPath(), Args: []string{"agent-demo"}}
	root, err := os.MkdirTemp("", "berth-bench-direct-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	a, _, err := startDirect(spec, root, berth.SandboxHost)
	if err != nil {
		return err
	}
	t0 = time.Now()
	err = a.discardTurn(fmt.Sprintf("flood %d %d", n, chunk))
	res.DirectSeconds = time.Since(t0).Seconds()
	a.close()
	if err != nil {
		return err
	}

	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	fmt.Fprintf(tw, "machine\t%s (load %.1f)\n", res.Machine, res.LoadAverage)
	fmt.Fprintf(tw, "flood\t%s in %d chunks of %d bytes, one turn, cap %s\n", mb(res.FloodBytes), res.Chunks, res.ChunkBytes, mb(res.MaxTurnOutput))
	fmt.Fprintf(tw, "daemon RSS\t%s before, peak %s over the turn, %s with the reads after\n",
		mb(res.DaemonRSSBeforeKB<<10), mb(res.DaemonTurnHWMKB<<10), mb(res.DaemonHWMKB<<10))
	fmt.Fprintf(tw, "store growth\t%s (and a WAL of %s)\n", mb(res.StoreGrowthBytes), mb(res.WALBytes))
	fmt.Fprintf(tw, "spool\tpeak %s on disk, %s spooled in all\n", mb(res.SpoolPeakBytes), mb(res.SpoolSizeBytes))
	fmt.Fprintf(tw, "answers\t?wait=true %s, transcript %s\n", mb(int64(res.WaitTextBytes)), mb(int64(res.TranscriptTextBytes)))
	fmt.Fprintf(tw, "dropped\t%s (runtime_warning output_truncated)\n", mb(res.DroppedBytes))
	fmt.Fprintf(tw, "turn\t%.2f s through berth, %.2f s direct\n", res.TurnSeconds, res.DirectSeconds)
	return tw.Flush()
}

// binaryPath is the berth binary the options run.
func (o benchBootOptions) binaryPath() string {
	if o.binary != "" {
		return o.binary
	}
	self, _ := os.Executable()
	return self
}

// fileSize is a file's size, 0 when it is not there.
func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// waitIdle waits until session id has no turn in flight.
func waitIdle(ctx context.Context, c *bclient.Client, id string) error {
	for {
		s, err := c.GetSession(ctx, id)
		if err != nil {
			return err
		}
		if s.CurrentTurnID == "" && s.State == berth.StateActive {
			return nil
		}
		if s.State != berth.StateActive {
			return fmt.Errorf("session %s is %s", id, s.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// spoolBytes is the disk the spools in runDir take, and their sizes
// (punched space included).
func spoolBytes(runDir string) (disk, size int64) {
	paths, _ := filepath.Glob(filepath.Join(runDir, "*.spool"))
	for _, p := range paths {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			disk += st.Blocks * 512
			size += st.Size
		}
	}
	return disk, size
}

// discardTurn prompts the agent with text and reads its stdout, as fast as
// a reader can and keeping nothing, until the prompt's answer: the floor
// of a flood turn.
func (a *directAgent) discardTurn(text string) error {
	a.next++
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.next, "method": "session/prompt",
		"params": map[string]any{"sessionId": a.sid, "prompt": []map[string]string{{"type": "text", "text": text}}}})
	if err != nil {
		return err
	}
	if _, err := a.stdin.Write(append(req, '\n')); err != nil {
		return err
	}
	answer := fmt.Appendf(nil, `"id":%d`, a.next)
	for short := true; ; {
		line, err := a.out.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: an update, not the answer.
			short = false
			continue
		}
		if err != nil {
			return err
		}
		if short && bytes.Contains(line, answer) && bytes.Contains(line, []byte(`"result"`)) {
			return nil
		}
		short = true
	}
}
