package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// needV1Pids skips a test of Prewarm where it makes nothing: a daemon
// that may not make cgroups, or a v2 host (bwrap is cloned into its
// cgroup there).
func needV1Pids(t *testing.T) {
	t.Helper()
	r := pidsRoot()
	if r.dir == "" {
		testenv.MissingCgroup(t, "a pids cgroup", "%s", r.why)
	}
	if r.v2 {
		t.Skip("the pids cgroup is v2: bwrap is cloned into its cgroup, nothing is made ahead")
	}
}

// prewarm runs Prewarm for w and waits until all it makes is made,
// returning its drop; the cleanup drops what is left and lets the next
// test prewarm again.
func prewarm(t *testing.T, w Warm) func() {
	t.Helper()
	drop := Prewarm(w)
	t.Cleanup(func() {
		drop()
		resetWarm()
	})
	warm.mu.Lock()
	readies := []chan struct{}{warm.cgReady, warm.stageReady, warm.viewReady}
	warm.mu.Unlock()
	for _, ready := range readies {
		if ready != nil {
			<-ready
		}
	}
	return drop
}

// prewarmed runs Prewarm for cgroups and waits for them, returning their
// pids cgroup and Prewarm's drop (see prewarm).
func prewarmed(t *testing.T, pids, memory bool) (string, func()) {
	t.Helper()
	drop := prewarm(t, Warm{Pids: pids, Memory: memory})
	warm.mu.Lock()
	defer warm.mu.Unlock()
	if warm.cg == nil || warm.cg.pidsDir == "" {
		t.Fatalf("Prewarm made no pids cgroup: %+v", warm.cg)
	}
	return warm.cg.pidsDir, drop
}

// pidsCgroup makes a sandbox's cgroups with a pids limit of 64, removed
// when the test ends, and checks the limit is in its pids cgroup.
func pidsCgroup(t *testing.T) *sandboxCgroup {
	t.Helper()
	cg, err := newCgroup(64, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cg.remove() })
	if b, err := os.ReadFile(filepath.Join(cg.pidsDir, "pids.max")); err != nil || strings.TrimSpace(string(b)) != "64" {
		t.Fatalf("pids.max = %q, %v", b, err)
	}
	return cg
}

// The cgroup a shim makes ahead is the one its sandbox takes, with the
// sandbox's limit written in it; emptied of the thread that joined it.
func TestASandboxTakesTheCgroupMadeAhead(t *testing.T) {
	needV1Pids(t)
	dir, _ := prewarmed(t, true, false)
	if b, err := os.ReadFile(filepath.Join(dir, "tasks")); err != nil || strings.TrimSpace(string(b)) != "" {
		t.Fatalf("the cgroup made ahead holds %q (%v): the thread that joined it did not leave", b, err)
	}
	if cg := pidsCgroup(t); cg.pidsDir != dir {
		t.Fatalf("the sandbox's cgroup is %s, not the one made ahead (%s)", cg.pidsDir, dir)
	}
	// Taken once: the next sandbox makes its own.
	if next := pidsCgroup(t); next.pidsDir == dir {
		t.Fatal("two sandboxes got the one cgroup made ahead")
	}
}

// A sandbox that needs other controllers than those made ahead does not
// take them: they are removed, and its own are made.
func TestACgroupMadeAheadThatDoesNotFitIsRemoved(t *testing.T) {
	needV1Pids(t)
	if r := memoryRoot(); r.dir == "" {
		testenv.MissingCgroup(t, "a memory cgroup", "%s", r.why)
	}
	dir, _ := prewarmed(t, true, false)
	cg, err := newCgroup(64, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cg.remove() }()
	if cg.pidsDir == dir || cg.memDir == "" {
		t.Fatalf("the sandbox's cgroups %+v: want its own, with memory", cg)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the cgroup made ahead is still there (%v)", err)
	}
}

// What no sandbox took is removed once the shim is done.
func TestACgroupMadeAheadIsDropped(t *testing.T) {
	needV1Pids(t)
	dir, drop := prewarmed(t, true, false)
	drop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("drop left the cgroup made ahead (%v)", err)
	}
}

// A cgroup made ahead that is gone by the time a sandbox opens (removed
// by hand) is replaced by a new one: the sandbox still gets its limit.
func TestACgroupMadeAheadThatIsGoneIsReplaced(t *testing.T) {
	needV1Pids(t)
	dir, _ := prewarmed(t, true, false)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if cg := pidsCgroup(t); cg.pidsDir == dir {
		t.Fatal("the sandbox got the cgroup that is gone")
	}
}

// prewarmedStage runs Prewarm for a stage and waits for it, returning it
// and Prewarm's drop (see prewarm).
func prewarmedStage(t *testing.T) (*stageDir, func()) {
	t.Helper()
	drop := prewarm(t, Warm{Stage: true})
	warm.mu.Lock()
	defer warm.mu.Unlock()
	sd := warm.stage
	if sd == nil || len(sd.spareDirs) != stageDirsAhead || len(sd.spareFiles) != stageFilesAhead {
		t.Fatalf("Prewarm made no stage with its entries: %+v", sd)
	}
	if fi, err := os.Stat(sd.path); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("the stage made ahead: %v, %v; want a directory of mode 0711", fi, err)
	}
	return sd, drop
}

// A root daemon's sandbox opened by a shim takes the stage made ahead,
// its entries too, and runs in it as in one made at Open: the workspace
// and home bound there are the sandbox's. Taken once: the next sandbox
// makes its own.
func TestASandboxTakesTheStageMadeAhead(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon's sandbox has a stage")
	provider(t)
	sd, _ := prewarmedStage(t)
	spare := append(append([]string(nil), sd.spareDirs...), sd.spareFiles...)
	p := New(Options{EtcView: testEtcView})
	_, ws, home := rootsWorkspace(t)
	cfg := berth.SandboxConfig{SessionID: "ses_warmstage", Workspace: ws, Home: home,
		Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}}}
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	st := sb.(*Sandbox).stage
	if st.dir != sd {
		t.Fatalf("the sandbox's stage is %s, not the one made ahead (%s)", st.dir.path, sd.path)
	}
	for _, e := range st.entries {
		if !slices.Contains(spare, e) {
			t.Errorf("entry %s was made at Open, not ahead (%v)", e, spare)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "given.txt"), []byte("GIVEN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, status := run(t, sb.(*Sandbox), `/.berth/busybox cat given.txt; echo home > "$HOME/h.txt" && echo WROTE`)
	if !status.Success() || !strings.Contains(out, "GIVEN\nWROTE") {
		t.Fatalf("status %+v, output %q", status, out)
	}
	if b, err := os.ReadFile(filepath.Join(home, "h.txt")); err != nil || string(b) != "home\n" {
		t.Errorf("the home bound through the stage made ahead: %q, %v", b, err)
	}
	next, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(context.Background())
	if next.(*Sandbox).stage.dir.path == sd.path {
		t.Fatal("two sandboxes got the one stage made ahead")
	}
}

// A stage made ahead that lost an entry since (a cleaner of /tmp) is not
// taken but removed: newStage makes its own.
func TestAStageMadeAheadThatLostAnEntryIsReplaced(t *testing.T) {
	sd, _ := prewarmedStage(t)
	if err := os.Remove(sd.spareDirs[0]); err != nil {
		t.Fatal(err)
	}
	if got := takeWarmStage(); got != nil {
		t.Fatalf("took a stage made ahead with an entry gone: %+v", got)
	}
	if _, err := os.Lstat(sd.path); !os.IsNotExist(err) {
		t.Fatalf("the broken stage made ahead is still there (%v)", err)
	}
}

// What no sandbox took is removed once the shim is done.
func TestAStageMadeAheadIsDropped(t *testing.T) {
	sd, drop := prewarmedStage(t)
	drop()
	if _, err := os.Lstat(sd.path); !os.IsNotExist(err) {
		t.Fatalf("drop left the stage made ahead (%v)", err)
	}
}
