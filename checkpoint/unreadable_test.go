package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// asOwner runs fn on a thread without the capabilities that pass over
// file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), as a
// daemon that is not root runs; the thread ends with fn.
func asOwner(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		// Never unlocked: the thread, its capabilities gone, exits with
		// the goroutine.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		for _, c := range []uint{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER} {
			data[c/32].Effective &^= 1 << (c % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		// Lowering one's own effective set needs no privilege.
		t.Fatalf("cannot drop capabilities: %v", err)
	}
}

// TestUnreadablePathsAreSkipped: a directory or a file an agent made
// unreadable (mode 000; a daemon that is not root cannot pass over it) is
// left out and listed, not a failed checkpoint: otherwise an agent could
// turn off the checkpoints that undo its next turn. A rewind leaves them.
func TestUnreadablePathsAreSkipped(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	write(t, ws, "a.txt", "alpha", 0o644)
	write(t, ws, "locked/secret.txt", "s", 0o644)
	write(t, ws, "z.txt", "zed", 0o000)
	must(t, os.Chmod(filepath.Join(ws, "locked"), 0o000))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "locked"), 0o755) })
	s := newStore(t, Options{})
	var c *Checkpoint
	var cerr, rerr error
	asOwner(t, func() {
		c, cerr = s.Create(ctx, "ses_a", "t1", ws)
		if cerr != nil {
			return
		}
		write(t, ws, "a.txt", "changed", 0o644)
		_, rerr = s.Restore(ctx, "ses_a", c.ID, ws)
	})
	if cerr != nil {
		t.Fatalf("checkpoint with unreadable paths: %v", cerr)
	}
	got := map[string]string{}
	for _, sk := range c.Skipped {
		got[sk.Path] = sk.Reason
	}
	if c.Files != 1 || got["locked"] != SkipUnreadable || got["z.txt"] != SkipUnreadable {
		t.Fatalf("files %d, skipped %v", c.Files, c.Skipped)
	}
	if rerr != nil {
		t.Fatalf("restore: %v", rerr)
	}
	if readTo(t, ws, "a.txt") != "alpha" {
		t.Fatal("a.txt not restored")
	}
	for _, p := range []string{"z.txt", "locked/secret.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Fatalf("the rewind removed %s, which the checkpoint could not read: %v", p, err)
		}
	}
}
