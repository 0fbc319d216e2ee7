package bwrap

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// A root daemon's stage needs neither mount(8) nor setpriv(1): the binds
// are made and the ids dropped by the daemon itself, with no process
// started for them (util-linux gone from PATH, the sandbox still runs, as
// the host uid, in the workspace it was given).
func TestHostUIDStageStartsNoHelper(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon stages its binds")
	bw := provider(t).path
	t.Setenv("PATH", t.TempDir())
	p := New(Options{Path: bw})
	if !p.dropping() {
		t.Fatal("a root daemon's provider does not drop to the host uid")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Fatalf("Probe without setpriv(1) on PATH: %v", err)
	}
	cfg := berth.SandboxConfig{SessionID: "ses_stage_test", Workspace: t.TempDir(), Home: t.TempDir(),
		Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}}}
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open without mount(8) and setpriv(1) on PATH: %v", err)
	}
	defer sb.Close(context.Background())
	out, st := run(t, sb.(*Sandbox), `echo in > staged.txt && /.berth/busybox id -u`)
	if !st.Success() || strings.TrimSpace(out) != "1000" {
		t.Fatalf("status %+v, output %q", st, out)
	}
	if uid, _ := ownerOf(t, cfg.Workspace+"/staged.txt"); uid != DefaultHostUID {
		t.Errorf("the file written inside belongs to %d, want the host uid %d", uid, DefaultHostUID)
	}
}

// Starting sandboxes changes no thread of the daemon for good: every
// thread is back in the process's mount namespace, working directory and
// pids cgroup (the thread that forked bwrap joined the sandbox's, and for
// a root daemon made the stage's binds in a namespace of its own).
func TestStartLeavesTheThreadsAsTheyWere(t *testing.T) {
	p := provider(t)
	wantNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	wantCwd, _ := os.Getwd()
	wantCgroup, _ := os.ReadFile("/proc/self/cgroup")
	for range 8 {
		sb, _ := open(t, func(c *berth.SandboxConfig) { c.Limits.Pids = 64 })
		if p.LimitsPids() && sb.cgroup == nil {
			t.Fatal("no pids cgroup made")
		}
		if out, st := run(t, sb, `echo ok`); !st.Success() || out != "ok\n" {
			t.Fatalf("status %+v, output %q", st, out)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		dir := "/proc/self/task/" + task.Name()
		if ns, err := os.Readlink(dir + "/ns/mnt"); err == nil && ns != wantNS {
			t.Errorf("thread %s is in mount namespace %s, the process in %s", task.Name(), ns, wantNS)
		}
		if cwd, err := os.Readlink(dir + "/cwd"); err == nil && cwd != wantCwd {
			t.Errorf("thread %s works in %s, the process in %s", task.Name(), cwd, wantCwd)
		}
		if cg, err := os.ReadFile(dir + "/cgroup"); err == nil && string(cg) != string(wantCgroup) {
			t.Errorf("thread %s is in cgroups\n%s\nthe process in\n%s", task.Name(), cg, wantCgroup)
		}
	}
}
