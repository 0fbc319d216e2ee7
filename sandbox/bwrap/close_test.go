package bwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
)

// A sandbox's pids cgroup is removed even when its last processes leave it
// only after Close began (killed, but not yet reaped: the kernel refuses to
// remove a cgroup with a process in it). One rmdir used to give up at once
// and leave the empty cgroups of stopped sandboxes behind.
func TestRemoveWaitsForTheCgroupToEmpty(t *testing.T) {
	if !provider(t).LimitsPids() {
		testenv.MissingCgroup(t, "a pids cgroup", "no pids cgroup this process may create children in")
	}
	cg, err := newCgroup(16, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := cg.dirs[0]
	t.Cleanup(func() { _ = os.Remove(dir) })
	cmd := exec.Command("/bin/sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	// The process dies and is reaped a moment after the removal begins.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		time.Sleep(100 * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	err = cg.remove()
	<-reaped
	if err != nil {
		t.Fatalf("remove while the last process was being reaped: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the cgroup %s is still there (%v)", dir, err)
	}
}
