package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/objstore"
)

// storageResult is what `berth bench --cluster N --storage URL` adds: the
// sessions' state in an object store (docs/api.md, "Session state in an
// object store"), timed on the cluster's first node and on two daemons
// of their own, one with the store and one without.
type storageResult struct {
	// TurnOn/OffP50: prompt → turn_ended (?wait=true) of a session whose
	// workspace holds TurnFiles files and whose every turn writes one,
	// on a daemon with the store and one without, turns alternated.
	Turns      int     `json:"turns"`
	TurnFiles  int     `json:"turn_workspace_files"`
	TurnOnP50  float64 `json:"turn_storage_on_p50_ms"`
	TurnOffP50 float64 `json:"turn_storage_off_p50_ms"`
	TurnOnP99  float64 `json:"turn_storage_on_p99_ms"`
	TurnOffP99 float64 `json:"turn_storage_off_p99_ms"`
	TurnOnOff  float64 `json:"turn_storage_on_off_ratio"`
	// TurnPairedOnOff is the median, over the rounds, of a round's on turn
	// over its off turn: each pair ran back to back, so a load that
	// changes over the run moves both alike.
	TurnPairedOnOff float64 `json:"turn_storage_paired_on_off_ratio"`
	TurnOnLagMs     float64 `json:"turn_storage_last_synced_after_ms"`
	// TurnOn/OffCPUMs: each daemon's own CPU time (its shims' and agents'
	// left out) a timed turn, on average, the writes to the store made
	// meanwhile included.
	TurnOnCPUMs  float64 `json:"turn_storage_on_daemon_cpu_ms"`
	TurnOffCPUMs float64 `json:"turn_storage_off_daemon_cpu_ms"`
	// Sync*: a session's first turn with a workspace of SyncFiles small
	// files, from its turn_ended until storage.synced_seq is that turn.
	SyncFiles int     `json:"sync_files"`
	SyncBytes int64   `json:"sync_bytes"`
	SyncMs    float64 `json:"sync_files_ms"`
	// SyncAllMs: until the store has its first checkpoint too (written
	// after the state at a session's first write).
	SyncAllMs float64 `json:"sync_files_checkpoint_ms"`
	// Upload*: the same for UploadBytes of incompressible 8 MiB files.
	UploadBytes     int64   `json:"upload_bytes"`
	UploadMs        float64 `json:"upload_ms"`
	UploadMiBPerSec float64 `json:"upload_mib_per_sec"`
	// RestoreMs: objstore.Restore of the SyncFiles session's state (its
	// workspace and HOME) into empty directories, each run.
	RestoreMs  []float64 `json:"restore_ms"`
	RestoreP50 float64   `json:"restore_p50_ms"`
	// WriteFloorMs: this disk's own time to write the same files (the
	// bench writing them into the session's workspace), the floor.
	WriteFloorMs float64 `json:"restore_floor_write_ms"`
	// FailoverActiveMs: SIGKILL of the first node until each of these
	// sessions is active on another node (the cluster's failover is
	// "resume"), by what it holds.
	FailoverActiveMs map[string]float64 `json:"failover_active_ms"`
}

// storageOptions say which store the storage bench uses and how much it
// writes there.
type storageOptions struct {
	url string
	// files is the small files of the workspace synced and restored;
	// bulkMiB the MiB of 8 MiB files whose upload is timed.
	files, bulkMiB int
}

// Sizes of the storage bench's other workspaces.
const (
	storageTurnFiles = 1_000
	storageBulkSize  = 8 << 20
	storageRestores  = 5
)

// storageTurns times turns on two daemons of their own, one with the store
// at url and one without, alternated so the machine's load moves both
// alike.
func storageTurns(ctx context.Context, o benchBootOptions, url string, turns int, res *storageResult, progress io.Writer) error {
	fmt.Fprintf(progress, "%d turns each with the object store on and off…\n", turns)
	res.Turns, res.TurnFiles = turns, storageTurnFiles
	var clients [2]*bclient.Client
	var ids [2]string
	var on *benchServe
	var pids [2]int
	for i, env := range [][]string{{"BERTH_STORAGE_URL=" + url}, nil} {
		home, err := os.MkdirTemp("", "berth-bench-storage-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(home)
		if err := writeBenchConfig(home, 4, true); err != nil {
			return err
		}
		so := benchBootOptions{binary: o.binary, sandbox: o.sandbox}
		s, err := startBenchServe(so, home, env...)
		if err != nil {
			return err
		}
		defer s.stop(time.Minute)
		if _, err := s.health(ctx, 30*time.Second); err != nil {
			return err
		}
		sess, err := s.c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: o.sandbox})
		if err != nil {
			return s.failed("create", err)
		}
		if _, err := writeFiles(sess.Workspace, storageTurnFiles, 4<<10, int64(i)); err != nil {
			return err
		}
		clients[i], ids[i], pids[i] = s.c, sess.ID, s.cmd.Process.Pid
		if i == 0 {
			on = s
		}
	}
	// A session's first write (its workspace, and its first checkpoint a
	// PUT a file) is timed by storageSync: the turns here are timed once
	// it is done.
	if _, err := on.c.PromptWait(ctx, ids[0], berth.PromptRequest{Text: "echo first"}); err != nil {
		return err
	}
	if err := waitSynced(ctx, on, ids[0], 5*time.Minute); err != nil {
		return err
	}
	// The first checkpoint's blobs follow the state: done when the daemon
	// says nothing waits.
	if err := waitStoreIdle(ctx, on, 5*time.Minute); err != nil {
		return err
	}
	var times [2][]time.Duration
	var cpu [2]time.Duration
	for k := range turns + 2 {
		// Each first in turn: neither pays for going first.
		for j := range clients {
			i := (j + k) % len(clients)
			c := clients[i]
			t0 := time.Now()
			r, err := c.PromptWait(ctx, ids[i], berth.PromptRequest{Text: fmt.Sprintf("write turn-%d.txt %d", k, k)})
			if err != nil {
				return err
			}
			if r.StopReason != berth.TurnEndTurn {
				return fmt.Errorf("turn %d ended %s", k, r.StopReason)
			}
			// The first two turns warm both up.
			if k == 2 && j == 0 {
				cpu = daemonsCPU(pids)
			}
			if k >= 2 {
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	// Over the timed turns and the writes made meanwhile (not the wait
	// below, whose polling is the bench's).
	end := daemonsCPU(pids)
	res.TurnOnCPUMs = ms(end[0]-cpu[0]) / float64(turns)
	res.TurnOffCPUMs = ms(end[1]-cpu[1]) / float64(turns)
	res.TurnOnP50, res.TurnOffP50 = pct(times[0], 50), pct(times[1], 50)
	res.TurnOnP99, res.TurnOffP99 = pct(times[0], 99), pct(times[1], 99)
	res.TurnOnOff = res.TurnOnP50 / res.TurnOffP50
	res.TurnPairedOnOff = pairedRatio(times[0], times[1])
	// The store kept up: how long after the last turn it has it.
	t0 := time.Now()
	if err := waitSynced(ctx, on, ids[0], time.Minute); err != nil {
		return err
	}
	res.TurnOnLagMs = msSince(t0)
	return nil
}

// pairedRatio is the median of on[i]/off[i].
func pairedRatio(on, off []time.Duration) float64 {
	var r []float64
	for i := range min(len(on), len(off)) {
		if off[i] > 0 {
			r = append(r, float64(on[i])/float64(off[i]))
		}
	}
	if len(r) == 0 {
		return 0
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// daemonsCPU is the CPU time each of the processes pids has used so far
// (0 when it cannot be read).
func daemonsCPU(pids [2]int) [2]time.Duration {
	var out [2]time.Duration
	for i, pid := range pids {
		out[i], _ = procCPU(pid)
	}
	return out
}

// storageSync times the upload of a workspace of small files and one of
// large files on the node owner, then restores the first into empty
// directories. It returns the two sessions' ids.
func storageSync(ctx context.Context, o benchBootOptions, owner *clusterNode, so storageOptions, res *storageResult, progress io.Writer) ([]string, error) {
	var ids []string
	res.SyncFiles = so.files
	for _, w := range []struct {
		files int
		size  int
		ms    *float64
		bytes *int64
	}{
		{so.files, 8 << 10, &res.SyncMs, &res.SyncBytes},
		{max(so.bulkMiB*(1<<20)/storageBulkSize, 1), storageBulkSize, &res.UploadMs, &res.UploadBytes},
	} {
		sess, err := owner.s.c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: o.sandbox})
		if err != nil {
			return ids, owner.s.failed("create", err)
		}
		ids = append(ids, sess.ID)
		fmt.Fprintf(progress, "a workspace of %d files to the object store…\n", w.files)
		t0 := time.Now()
		n, err := writeFiles(sess.Workspace, w.files, w.size, int64(len(ids)))
		if err != nil {
			return ids, err
		}
		if len(ids) == 1 {
			res.WriteFloorMs = msSince(t0)
		}
		*w.bytes = n
		if _, err := owner.s.c.PromptWait(ctx, sess.ID, berth.PromptRequest{Text: "echo synced"}); err != nil {
			return ids, err
		}
		t0 = time.Now()
		if err := waitSynced(ctx, owner.s, sess.ID, 5*time.Minute); err != nil {
			return ids, err
		}
		*w.ms = msSince(t0)
		if len(ids) == 1 {
			if err := waitStoreIdle(ctx, owner.s, 5*time.Minute); err != nil {
				return ids, err
			}
			res.SyncAllMs = msSince(t0)
		}
	}
	res.UploadMiBPerSec = float64(res.UploadBytes) / (1 << 20) / (res.UploadMs / 1000)
	fmt.Fprintf(progress, "restoring %d files %d times…\n", so.files, storageRestores)
	c, err := objstore.Open(objstore.Config{URL: so.url, Environ: os.Environ()})
	if err != nil {
		return ids, err
	}
	// Each restore into a directory of its own, all removed at the end:
	// no restore pays for its predecessor's removal.
	dir, err := os.MkdirTemp("", "berth-bench-restore-")
	if err != nil {
		return ids, err
	}
	defer os.RemoveAll(dir)
	var took []time.Duration
	for i := range storageRestores {
		d, err := timeRestore(ctx, c, ids[0], so.files, filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			return ids, err
		}
		took = append(took, d)
		res.RestoreMs = append(res.RestoreMs, float64(d.Microseconds())/1000)
	}
	res.RestoreP50 = pct(took, 50)
	return ids, nil
}

// timeRestore restores session id's state into empty directories under
// dir and times it.
func timeRestore(ctx context.Context, c *objstore.Client, id string, files int, dir string) (time.Duration, error) {
	ws, home := filepath.Join(dir, "workspace"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	st, err := objstore.Restore(ctx, c, id, ws, home, objstore.RestoreOptions{})
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if st.Workspace == nil || len(st.Workspace.Files) < files {
		return 0, fmt.Errorf("the restored state of session %s has too few workspace paths, want %d files", id, files)
	}
	return took, nil
}

// waitSynced waits until the store has session id as of its last turn.
func waitSynced(ctx context.Context, s *benchServe, id string, bound time.Duration) error {
	evs, err := s.c.ListEvents(ctx, id, berth.EventFilter{Type: berth.EventTurnEnded, Limit: 1000})
	if err != nil || len(evs) == 0 {
		return fmt.Errorf("session %s has no turn_ended: %v", id, err)
	}
	want := evs[len(evs)-1].Seq
	deadline := time.Now().Add(bound)
	for {
		sess, err := s.c.GetSession(ctx, id)
		if err != nil {
			return err
		}
		if sess.Storage != nil && sess.Storage.SyncedSeq >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return s.failed("storage", fmt.Errorf("session %s not synced to seq %d after %s: %+v", id, want, bound, sess.Storage))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitStoreIdle waits until s's health says the object store has every
// session (no lag, no error).
func waitStoreIdle(ctx context.Context, s *benchServe, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		h, err := s.c.Health(ctx)
		if err != nil {
			return err
		}
		if h.Storage != nil && *h.Storage == (berth.StorageHealth{}) {
			return nil
		}
		if time.Now().After(deadline) {
			return s.failed("storage", fmt.Errorf("the object store still lags %s after the turns: %+v", bound, h.Storage))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failoverActive waits, after owner was killed at killed, until each of
// ids is active on a node other than owner, and records when.
func failoverActive(ctx context.Context, owner *clusterNode, via *clusterNode, ids map[string]string, killed time.Time, ttl time.Duration, res *storageResult) error {
	res.FailoverActiveMs = map[string]float64{}
	for len(res.FailoverActiveMs) < len(ids) {
		for what, id := range ids {
			if _, ok := res.FailoverActiveMs[what]; ok {
				continue
			}
			s, err := via.s.c.GetSession(ctx, id)
			if err == nil && s.State == berth.StateActive && s.Node != "" && s.Node != owner.id {
				res.FailoverActiveMs[what] = msSince(killed)
			}
		}
		if time.Since(killed) > 5*ttl+time.Minute {
			return via.s.failed("failover", fmt.Errorf("sessions not active elsewhere %s after the kill: %v", time.Since(killed), res.FailoverActiveMs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// writeFiles writes n files of size random bytes (of 1 to size bytes when
// size is under a MiB) into dir, 30 to a directory, and returns their
// bytes.
func writeFiles(dir string, n, size int, seed int64) (int64, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	buf := make([]byte, size)
	var total int64
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/30))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return 0, err
		}
		m := size
		if size < 1<<20 {
			m = 1 + rng.IntN(size)
		}
		for j := 0; j < m; j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && j+k < m; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.bin", i)), buf[:m], 0o644); err != nil {
			return 0, err
		}
		total += int64(m)
	}
	return total, nil
}

// printStorage writes the object store's figures as text.
func printStorage(out io.Writer, st *storageResult, ttl time.Duration) {
	fmt.Fprintf(out, "object store, a turn (%d files, one written a turn): on p50 %.2f ms p99 %.2f ms, off p50 %.2f ms p99 %.2f ms (on/off %.3f; synced %.0f ms after the last)\n",
		st.TurnFiles, st.TurnOnP50, st.TurnOnP99, st.TurnOffP50, st.TurnOffP99, st.TurnOnOff, st.TurnOnLagMs)
	fmt.Fprintf(out, "object store, a turn on/off paired by round: median %.3f; the daemon's CPU a turn: on %.2f ms, off %.2f ms\n",
		st.TurnPairedOnOff, st.TurnOnCPUMs, st.TurnOffCPUMs)
	fmt.Fprintf(out, "object store, first sync of %d files (%.1f MiB): %.0f ms after turn_ended, its checkpoint too %.0f ms\n",
		st.SyncFiles, float64(st.SyncBytes)/(1<<20), st.SyncMs, st.SyncAllMs)
	fmt.Fprintf(out, "object store, upload of %.0f MiB in 8 MiB files: %.0f ms, %.1f MiB/s\n",
		float64(st.UploadBytes)/(1<<20), st.UploadMs, st.UploadMiBPerSec)
	fmt.Fprintf(out, "object store, restore of %d files: p50 %.0f ms %v (this disk writes them in %.0f ms)\n",
		st.SyncFiles, st.RestoreP50, st.RestoreMs, st.WriteFloorMs)
	fmt.Fprintf(out, "failover to active elsewhere (≤ 2 × %s + 3 s = %s):", ttl, 2*ttl+3*time.Second)
	for what, ms := range st.FailoverActiveMs {
		fmt.Fprintf(out, "  %s %.0f ms", what, ms)
	}
	fmt.Fprintln(out)
}
