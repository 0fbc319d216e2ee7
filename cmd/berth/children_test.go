package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
)

// parentPID is the parent process of pid (0 when it cannot be read).
func parentPID(pid int) int {
	st, _ := procfs.ReadStat(pid)
	return st.PPID
}

// berth spawn makes a child (its first prompt run), berth children lists
// it, berth ls draws it indented under its parent, and -o json stays the
// API's JSON.
func TestSpawnChildrenAndTreeCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	var parent, other berth.Session
	parent = s.create(t, map[string]any{"name": "parent"})
	other = s.create(t, map[string]any{"name": "other"})

	var kid berth.Session
	raw := s.cli(t, "-o", "json", "spawn", parent.ID, "--name", "kid", "--ttl", "10m", "echo hi from the kid")
	if err := json.Unmarshal([]byte(raw), &kid); err != nil || kid.ParentID != parent.ID || kid.Depth != 1 || kid.TTLSeconds != 600 {
		t.Fatalf("spawn -o json: %v %q", err, raw)
	}
	if out := s.cli(t, "spawn", parent.ID, "--name", "kid2", "--permissions", "deny-all", "--agent", "demo"); !strings.HasPrefix(out, "spawned ses_") ||
		!strings.Contains(out, "under "+parent.ID) {
		t.Fatalf("spawn: %q", out)
	}
	// Refusals: a looser mode (403, exit 1), a grandchild past max_depth
	// (409, exit 4), no such parent (exit 3).
	if code, out := s.cliFails(t, "spawn", parent.ID, "--permissions", "approve-all"); code != 1 || !strings.Contains(out, "looser") {
		t.Fatalf("spawn --permissions approve-all: exit %d %q", code, out)
	}
	if code, out := s.cliFails(t, "spawn", kid.ID); code != 4 || !strings.Contains(out, "max_depth") {
		t.Fatalf("spawn under a child: exit %d %q", code, out)
	}
	if code, _ := s.cliFails(t, "spawn", "ses_nope", "--agent", "demo"); code != 3 {
		t.Fatalf("spawn under no session: exit %d", code)
	}
	s.waitLog(t, kid.ID, "the kid's first prompt", func(evs []berth.Event) bool {
		for _, ev := range evs {
			if ev.Type == berth.EventAgentMessage && strings.Contains(string(ev.Data), "hi from the kid") {
				return true
			}
		}
		return false
	})

	out := s.cli(t, "children", parent.ID)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.Contains(out, kid.ID) || !strings.Contains(out, "kid2") {
		t.Fatalf("berth children:\n%s", out)
	}
	// In ls, both children follow their parent, indented; the other root
	// is not between them.
	lines := strings.Split(strings.TrimSpace(s.cli(t, "ls")), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, parent.ID) {
			at = i
		}
	}
	if at < 0 || at+2 >= len(lines) {
		t.Fatalf("berth ls:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines[at+1 : at+3] {
		if !strings.HasPrefix(l, "└ ses_") || strings.Contains(l, other.ID) {
			t.Fatalf("berth ls: children not under their parent:\n%s", strings.Join(lines, "\n"))
		}
	}
	var page berth.SessionPage
	if err := json.Unmarshal([]byte(s.cli(t, "-o", "json", "ls")), &page); err != nil || len(page.Sessions) != 4 {
		t.Fatalf("ls -o json: %v %d sessions", err, len(page.Sessions))
	}
	for _, got := range page.Sessions {
		if got.ID == kid.ID && (got.ParentID != parent.ID || got.RootID != parent.ID) {
			t.Fatalf("ls -o json lost the lineage: %+v", got)
		}
	}
}

// Across a SIGKILL of the daemon: a child whose parent died while the
// daemon was down is stopped at boot with parent_stopped (the parent's
// agent died in its shim, or the shim went too and the parent could not
// be reattached), and a child whose TTL ran out while it was down is
// stopped ttl_expired; a child of a parent that lived on keeps running.
func TestChildrenAcrossARestart(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	var doomed, lost, keeper berth.Session
	doomed = s.create(t, nil)
	lost = s.create(t, nil)
	keeper = s.create(t, nil)
	spawn := func(parent string, ttl int) berth.Session {
		var c berth.Session
		if st, err := s.api("POST", "/v1/sessions/"+parent+"/children", map[string]any{"agent": "demo", "ttl_seconds": ttl}, &c); st != 201 || err != nil {
			t.Fatalf("spawn: %d %v", st, err)
		}
		return c
	}
	orphan := spawn(doomed.ID, 600)
	orphan2 := spawn(lost.ID, 600)
	brief := spawn(keeper.ID, 2)
	lasting := spawn(keeper.ID, 600)

	s.kill9()
	// While the daemon is down, the doomed parent's agent dies, and the
	// lost one's shim with its agent.
	pids, lostPIDs := agentPIDs(doomed.ID), agentPIDs(lost.ID)
	if len(pids) == 0 || len(lostPIDs) == 0 {
		t.Fatal("the parents' agents are not running")
	}
	shims := map[int]bool{}
	for _, pid := range shimsOf(home) {
		shims[pid] = true
	}
	for _, pid := range lostPIDs {
		if pp := parentPID(pid); shims[pp] {
			pids = append(pids, pp)
		}
	}
	if len(pids) < len(agentPIDs(doomed.ID))+1 {
		t.Fatal("the lost parent's shim was not found")
	}
	for _, pid := range append(pids, lostPIDs...) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for time.Now().Before(brief.ExpiresAt.Add(100 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond)
	}

	s2 := startServer(t, home)
	for _, id := range []string{orphan.ID, orphan2.ID} {
		got := s2.waitSession(t, id, "the orphan to stop", func(x berth.Session) bool { return x.State == berth.StateStopped })
		if got.StopReason != berth.StopParentStopped {
			t.Fatalf("the child of a parent that died while the daemon was down stopped %s", got.StopReason)
		}
	}
	lp := s2.waitSession(t, lost.ID, "the lost parent to be closed", func(x berth.Session) bool { return x.State == berth.StateStopped })
	if lp.StopReason != berth.StopDaemonCrashed {
		t.Fatalf("the lost parent: %s/%s, want it not reattached", lp.State, lp.StopReason)
	}
	got := s2.waitSession(t, brief.ID, "the brief child to expire", func(x berth.Session) bool { return x.State == berth.StateStopped })
	if got.StopReason != berth.StopTTLExpired {
		t.Fatalf("a child whose TTL ran out while the daemon was down stopped %s", got.StopReason)
	}
	for _, id := range []string{keeper.ID, lasting.ID} {
		var x berth.Session
		if s2.api("GET", "/v1/sessions/"+id, nil, &x); x.State != berth.StateActive {
			t.Fatalf("%s after the restart: %s/%s", id, x.State, x.StopReason)
		}
	}
	// The lasting child's TTL is the one it was given, not restarted.
	var x berth.Session
	s2.api("GET", "/v1/sessions/"+lasting.ID, nil, &x)
	if x.ExpiresAt == nil || !x.ExpiresAt.Equal(*lasting.ExpiresAt) {
		t.Fatalf("TTL deadline %v after the restart, was %v", x.ExpiresAt, lasting.ExpiresAt)
	}
	// Stopping the root now stops its child.
	s2.api("POST", "/v1/sessions/"+keeper.ID+"/stop", nil, nil)
	if s2.api("GET", "/v1/sessions/"+lasting.ID, nil, &x); x.StopReason != berth.StopParentStopped {
		t.Fatalf("child of a reattached parent after the parent's stop: %s/%s", x.State, x.StopReason)
	}
	s2.stop()
	assertNoProcessUnder(t, home)
}
