package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"golang.org/x/sys/unix"
)

// sessionOf is the session id of process pid (getsid), or -1.
func sessionOf(pid int) int {
	sid, err := unix.Getsid(pid)
	if err != nil {
		return -1
	}
	return sid
}

// cmdlineOf is process pid's command line, its arguments space-separated.
func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// shimsSession returns the one session every shim of home serving a
// session is in, checking each is its process group's leader.
func shimsSession(t *testing.T, home string, want int) int {
	t.Helper()
	shims := shimSessions(home)
	if len(shims) < want {
		t.Fatalf("%d shims serve sessions, want %d", len(shims), want)
	}
	sid := -1
	for pid := range shims {
		s := sessionOf(pid)
		if pg, err := unix.Getpgid(pid); err != nil || pg != pid {
			t.Fatalf("shim %d: process group %d (%v), want its own", pid, pg, err)
		}
		if sid == -1 {
			sid = s
		} else if s != sid {
			t.Fatalf("shims in sessions %d and %d: want one", sid, s)
		}
		if s == pid {
			t.Fatalf("shim %d is a session of its own", pid)
		}
	}
	return sid
}

// Every shim of a daemon, and every agent under it, runs in one session:
// the spawner's, neither the daemon's nor a session of its own — so, under
// autogroup scheduling, they weigh together what the daemon weighs. The
// spawner goes with a daemon killed with SIGKILL; the shims stay in their
// session and are reattached, and the next daemon's shims are in its
// spawner's session.
func TestShimsShareTheSpawnersSession(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	a, b := s.busySession(t, nil), s.busySession(t, nil)
	sid := shimsSession(t, home, 2)
	if sid == sessionOf(s.cmd.Process.Pid) {
		t.Fatalf("the shims are in the daemon's session %d", sid)
	}
	if cl := cmdlineOf(sid); !strings.HasSuffix(cl, " shim-spawner") {
		t.Fatalf("the shims' session leader %d runs %q, want the spawner", sid, cl)
	}
	for _, id := range []string{a.ID, b.ID} {
		for _, pid := range agentPIDs(id) {
			if got := sessionOf(pid); got != sid {
				t.Fatalf("agent %d of %s is in session %d, want the shims' %d", pid, id, got, sid)
			}
		}
	}

	s.kill9()
	deadline := time.Now().Add(10 * time.Second)
	for alive(sid) {
		if time.Now().After(deadline) {
			t.Fatalf("the spawner %d outlived its daemon", sid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := shimsSession(t, home, 2); got != sid {
		t.Fatalf("after the daemon's death the shims are in session %d, want %d", got, sid)
	}

	s2 := startServer(t, home)
	for _, id := range []string{a.ID, b.ID} {
		s2.waitSession(t, id, "reattached", func(x berth.Session) bool { return x.State == berth.StateActive })
	}
	c := s2.busySession(t, nil)
	var next int
	for pid, id := range shimSessions(home) {
		if id == c.ID {
			next = sessionOf(pid)
		}
	}
	if next == sid || next <= 0 || !strings.HasSuffix(cmdlineOf(next), " shim-spawner") {
		t.Fatalf("the new daemon's shim is in session %d (%q), want its own spawner's", next, cmdlineOf(next))
	}
}
