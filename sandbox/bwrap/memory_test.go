package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// A sandbox with a memory limit gets a memory cgroup with that limit
// (swap included where the kernel counts it), its processes are in it,
// and Close removes it.
func TestMemoryCgroupMadeAndRemoved(t *testing.T) {
	p := provider(t)
	if err := p.LimitsMemory(); err != nil {
		testenv.MissingCgroup(t, "a memory cgroup", "%v", err)
	}
	sb, _ := open(t, func(c *berth.SandboxConfig) { c.Limits.MemoryBytes = 100 << 20 })
	cg := sb.cgroup
	if cg == nil || cg.memDir == "" {
		t.Fatalf("no memory cgroup: %+v", cg)
	}
	file := "memory.limit_in_bytes"
	if cg.memV2 {
		file = "memory.max"
	}
	if b, err := os.ReadFile(filepath.Join(cg.memDir, file)); err != nil || strings.TrimSpace(string(b)) != "104857600" {
		t.Errorf("%s = %q, %v", file, b, err)
	}
	// A process that waits on its stdin: the cgroup holds it (and bwrap).
	proc, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cg.memDir, "cgroup.procs")); err != nil || len(strings.Fields(string(b))) < 2 {
		t.Errorf("the memory cgroup holds %q (%v), want bwrap and the process", b, err)
	}
	_ = proc.Stdin().Close()
	if st, err := proc.Wait(); err != nil || !st.Success() {
		t.Fatalf("cat ended %+v, %v", st, err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, dir := range cg.dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the cgroup %s is still there after Close (%v)", dir, err)
		}
	}
}

// Where no memory cgroup can be made (a daemon that is not root, without
// delegation), a memory limit is refused with EUnavailable giving the
// reason, never run without; a sandbox without one still opens.
func TestMemoryLimitRefusedWithoutACgroup(t *testing.T) {
	p := provider(t)
	saved := memoryRoot
	t.Cleanup(func() { memoryRoot = saved })
	memoryRoot = func() cgroupRoot {
		return cgroupRoot{why: "cannot make a cgroup in /sys/fs/cgroup/memory/x: permission denied"}
	}
	cfg := berth.SandboxConfig{SessionID: "ses_nomem", Workspace: t.TempDir(), Limits: berth.SandboxLimits{MemoryBytes: 64 << 20}}
	_, err := p.Open(context.Background(), cfg)
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "permission denied") {
		t.Fatalf("Open with a memory limit and no cgroup = %v, want EUnavailable with the reason", err)
	}
	if p.LimitsMemory() == nil {
		t.Error("LimitsMemory says yes without a cgroup")
	}
	cfg.Limits.MemoryBytes = 0
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open without a memory limit: %v", err)
	}
	_ = sb.Close(context.Background())
}

// Under cgroup v2 bwrap is cloned into the sandbox's cgroup (whatever uid
// it runs as: a root daemon's bwrap runs as the host uid, which may not
// write cgroup.procs). Shown on a v2 hierarchy without controllers (a
// hybrid host's /sys/fs/cgroup/unified, or /sys/fs/cgroup itself): the
// sandbox's processes are in the cgroup, and Close removes it.
func TestCgroupV2ClonesInto(t *testing.T) {
	var root string
	for _, dir := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			root = dir
			break
		}
	}
	if root == "" {
		testenv.Missing(t, "a cgroup v2 hierarchy", "none mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified")
	}
	dir := filepath.Join(root, "berth-test-"+strings.ReplaceAll(t.Name(), "/", "-")+"-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.MissingCgroup(t, "a cgroup v2 hierarchy this process may write", "%v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	sb, _ := open(t, nil)
	sb.cgroup = &sandboxCgroup{dirs: []string{dir}, v2Dir: dir}
	proc, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || !slices.Contains(strings.Fields(string(b)), strconv.Itoa(proc.Pid())) {
		t.Errorf("bwrap (pid %d) is not in the v2 cgroup, which holds %q (%v)", proc.Pid(), b, err)
	}
	_ = proc.Stdin().Close()
	if st, err := proc.Wait(); err != nil || !st.Success() {
		t.Fatalf("cat ended %+v, %v", st, err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup %s is still there after Close (%v)", dir, err)
	}
}
