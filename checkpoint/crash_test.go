package checkpoint

import (
	"context"
	"fmt"
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
// crashDirEnv, until it is killed.
const (
	crashChildEnv = "BERTH_CHECKPOINT_CRASH_CHILD"
	crashDirEnv   = "BERTH_CHECKPOINT_CRASH_DIR"
)

func TestMain(m *testing.M) {
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
