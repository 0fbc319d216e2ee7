package checkpoint

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv makes the test binary the crash test's child: it deletes
// the sessions named in it, one after another, from the store in
// crashDirEnv, until it is killed. pruneChildEnv makes it the prune crash
// test's child (pruneChild).
const (
	crashChildEnv = "BERTH_CHECKPOINT_CRASH_CHILD"
	crashDirEnv   = "BERTH_CHECKPOINT_CRASH_DIR"
	pruneChildEnv = "BERTH_CHECKPOINT_PRUNE_CHILD"
)

func TestMain(m *testing.M) {
	if ws := os.Getenv(pruneChildEnv); ws != "" {
		pruneChild(ws, os.Getenv(crashDirEnv))
	}
	if ids := os.Getenv(crashChildEnv); ids != "" {
		s := New(os.Getenv(crashDirEnv), Options{})
		for _, id := range strings.Split(ids, ",") {
			if err := s.Delete(id); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDeleteKilledMidwayLosesNoSharedBlob: a daemon killed (SIGKILL) while
// it deletes sessions' checkpoints never leaves a surviving checkpoint
// without a blob it needs. Each round kills the deleter a little later.
func TestDeleteKilledMidwayLosesNoSharedBlob(t *testing.T) {
	ctx := context.Background()
	for round := range 6 {
		dir := filepath.Join(t.TempDir(), "ckpt")
		s := New(dir, Options{})
		type kept struct{ session, id, ws string }
		var keep []kept
		var doomed []string
		for i := range 8 {
			ws := t.TempDir()
			// Every session shares most content with the others.
			for f := range 40 {
				write(t, ws, fmt.Sprintf("d%d/f%d", f%4, f), fmt.Sprintf("shared %d", f), 0o644)
			}
			write(t, ws, "own", fmt.Sprintf("session %d", i), 0o644)
			sid := fmt.Sprintf("ses_%d", i)
			c, err := s.Create(ctx, sid, "t", ws)
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				doomed = append(doomed, sid)
			} else {
				keep = append(keep, kept{sid, c.ID, ws})
			}
		}
		self, _ := os.Executable()
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+strings.Join(doomed, ","), crashDirEnv+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		for _, k := range keep {
			write(t, k.ws, "d0/f0", "changed", 0o644)
			must(t, os.Remove(filepath.Join(k.ws, "own")))
			if _, err := New(dir, Options{}).Restore(ctx, k.session, k.id, k.ws); err != nil {
				t.Fatalf("round %d: %s after a killed delete: %v", round, k.session, err)
			}
			if b, _ := os.ReadFile(filepath.Join(k.ws, "d0/f0")); string(b) != "shared 0" {
				t.Fatalf("round %d: %s: d0/f0 %q", round, k.session, b)
			}
		}
		// A later delete sweeps what the killed one left.
		for _, sid := range doomed {
			must(t, s.Delete(sid))
		}
		if n := countBlobs(t, s); n != 40+len(keep) {
			t.Fatalf("round %d: %d blobs left, want %d", round, n, 40+len(keep))
		}
	}
}

// pruneCap is the prune crash test's max_tree_bytes: the files that do
// not change and three or four of its child's checkpoints.
const pruneCap = 100 << 10

// pruneChild is the attack's loop until it is killed: new random files in
// the workspace ws (beside files that do not change), a checkpoint of the parent or the child of one tree,
// a prune of that tree.
func pruneChild(ws, dir string) {
	s := New(dir, Options{MaxTreeBytes: pruneCap})
	// Files that never change: the manifests are deltas.
	for f := range 10 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("stable%d", f)), []byte{byte(f)}, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for i := 0; ; i++ {
		for f := range 3 {
			b := make([]byte, 4<<10)
			_, _ = rand.Read(b)
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", f)), b, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		if _, err := s.CreateIn(context.Background(), "ses_root", []string{"ses_root", "ses_kid"}[i%2], "t", ws); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if _, err := s.Prune("ses_root", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// TestPruneKilledMidwayLeavesEveryCheckpointWhole: a daemon killed
// (SIGKILL) while it creates and prunes a tree's checkpoints leaves every
// listed checkpoint restorable, and the next store's sweep leaves no blob
// nothing names, no manifest without metadata, no temporary file, and the
// accounting a rescan makes. Each round kills the child a little later.
func TestPruneKilledMidwayLeavesEveryCheckpointWhole(t *testing.T) {
	ctx := context.Background()
	for round := range 8 {
		dir := filepath.Join(t.TempDir(), "ckpt")
		self, _ := os.Executable()
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), pruneChildEnv+"="+t.TempDir(), crashDirEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		// Once the child prunes, at a point a little later each round.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
			_, e1 := os.Stat(filepath.Join(dir, "sessions", "ses_root", prunedFile))
			_, e2 := os.Stat(filepath.Join(dir, "sessions", "ses_kid", prunedFile))
			if e1 == nil || e2 == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("round %d: the child never pruned: %s", round, stderr.String())
			}
		}
		time.Sleep(time.Duration(round) * 2 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if strings.TrimSpace(stderr.String()) != "" {
			t.Fatalf("round %d: the child failed: %s", round, stderr.String())
		}

		s := New(dir, Options{MaxTreeBytes: pruneCap})
		if _, err := s.Sweep(); err != nil {
			t.Fatal(err)
		}
		for _, sid := range []string{"ses_root", "ses_kid"} {
			list, err := s.List(sid)
			must(t, err)
			for _, c := range list {
				if _, err := s.Restore(ctx, sid, c.ID, t.TempDir()); err != nil {
					t.Fatalf("round %d: %s %s after a killed prune: %v", round, sid, c.ID, err)
				}
			}
			files, _ := os.ReadDir(s.sessionDir(sid))
			for _, f := range files {
				id, isEntries := strings.CutSuffix(f.Name(), entriesExt)
				if _, err := os.Stat(s.metaPath(sid, id)); strings.HasPrefix(f.Name(), tempPrefix) || isEntries && err != nil {
					t.Fatalf("round %d: %s left in %s", round, f.Name(), sid)
				}
			}
		}
		if disk, want := diskBlobs(t, s), named(t, s, "ses_root", "ses_kid"); !maps.Equal(disk, want) {
			t.Fatalf("round %d: %d blobs on disk, %d named", round, len(disk), len(want))
		}
		sameAsRescan(t, s)
		if _, err := s.Prune("ses_root", nil); err != nil {
			t.Fatal(err)
		}
		if got := diskTreeBytes(t, s, "ses_root", "ses_kid"); got > pruneCap {
			t.Fatalf("round %d: %d bytes after a prune", round, got)
		}
	}
}
