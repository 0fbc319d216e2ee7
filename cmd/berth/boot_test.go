package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// shimPIDOf returns the pid of the shim serving a session of home.
func shimPIDOf(t *testing.T, home, id string) int {
	t.Helper()
	runDir := filepath.Join(home, "run")
	files, _ := filepath.Glob(filepath.Join(runDir, id+".*.pid"))
	for _, f := range files {
		if pid := shim.ReadPID(f, runDir); pid > 0 {
			return pid
		}
	}
	t.Fatalf("no shim pid file for session %s", id)
	return 0
}

// twoLiveSessions starts a daemon, creates two demo sessions, SIGKILLs
// the daemon (their agents run on in their shims) and stops (SIGSTOP) the
// second one's shim, which answers nothing until it is continued. It
// returns the sessions and a function that continues the shim.
func twoLiveSessions(t *testing.T, home string) (a, b berth.Session, cont func()) {
	t.Helper()
	s := startServer(t, home)
	for _, sess := range []*berth.Session{&a, &b} {
		if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, sess); st != 201 {
			t.Fatalf("create = %d %v", st, err)
		}
	}
	s.kill9()
	pid := shimPIDOf(t, home, b.ID)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(cont)
	return a, b, cont
}

// A booting daemon serves its API before every session is reattached:
// while one session's shim does not answer (stopped), /v1/health counts it
// as reattaching, the other session answers active, and the stopped one's
// reads answer at once from the store (docs/api.md, "Agents outlive the daemon (shims)"):
// its GET and its place in the list show it active, as it was stored, and
// its events are listed; once its shim answers it is live, active, and
// takes prompts.
func TestBootServesTheAPIBeforeEveryReattach(t *testing.T) {
	home := t.TempDir()
	a, b, cont := twoLiveSessions(t, home)

	s := startServer(t, home)
	if h := s.health(t); h.Reattaching < 1 {
		t.Fatalf("health while a shim is stopped: reattaching %d, want it counted", h.Reattaching)
	}
	var got berth.Session
	if st, err := s.api("GET", "/v1/sessions/"+a.ID, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Fatalf("GET of the session whose shim answers = %d %v %s", st, err, got.State)
	}
	if h := s.health(t); h.Reattaching != 1 {
		t.Fatalf("health once the other session answered: reattaching %d, want 1", h.Reattaching)
	}
	// The stopped shim's session answers its reads with what the store holds.
	if got := readWhileBooting[berth.Session](t, s, "/v1/sessions/"+b.ID); got.State != berth.StateActive {
		t.Fatalf("GET of a session still reattaching: state %s, want its stored active", got.State)
	}
	page := readWhileBooting[berth.SessionPage](t, s, "/v1/sessions")
	listed := false
	for _, ls := range page.Sessions {
		if ls.ID == b.ID {
			listed = ls.State == berth.StateActive
		}
	}
	if !listed {
		t.Fatalf("the session still reattaching is not listed active: %+v", page.Sessions)
	}
	if evs := readWhileBooting[struct{ Events []berth.Event }](t, s, "/v1/sessions/"+b.ID+"/events"); len(evs.Events) == 0 {
		t.Fatal("the events of a session still reattaching: none")
	}
	if h := s.health(t); h.Reattaching != 1 {
		t.Fatalf("health after the reads: reattaching %d, want the stopped shim's session still counted", h.Reattaching)
	}

	cont()
	if st, err := s.api("GET", "/v1/sessions/"+b.ID, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Fatalf("GET once the shim answers = %d %v %s (%v)", st, err, got.State, got.Failure)
	}
	if h := s.health(t); h.Reattaching != 0 {
		t.Fatalf("health after every reattach: reattaching %d", h.Reattaching)
	}
	var r berth.TurnResult
	if st, _ := s.api("POST", "/v1/sessions/"+b.ID+"/prompts?wait=true", map[string]string{"text": "echo back"}, &r); st != 200 || r.Text != "back" {
		t.Fatalf("prompt after the reattach = %d %+v", st, r)
	}
}

// readWhileBooting GETs path from s, which must answer 200 well before
// a reattach held back by a stopped shim could end (reattachTimeout, 5 s).
func readWhileBooting[T any](t *testing.T, s *server, path string) *T {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.addr+path, nil)
	s.authorize(req)
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s while a session is reattached: %v", path, err)
	}
	defer resp.Body.Close()
	var out T
	if err := json.NewDecoder(resp.Body).Decode(&out); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET %s while a session is reattached = %d %v", path, resp.StatusCode, err)
	}
	return &out
}

// A daemon told to stop while its boot still waits for a shim leaves that
// session as it is, active with its agent, and the next daemon reattaches
// it: a shutdown never closes a session it did not get to.
func TestShutdownDuringBootLeavesTheRestToTheNextDaemon(t *testing.T) {
	home := t.TempDir()
	_, b, cont := twoLiveSessions(t, home)
	agents := agentPIDs(b.ID)

	s := startServer(t, home)
	if h := s.health(t); h.Reattaching < 1 {
		t.Fatalf("reattaching %d, want the stopped shim's session counted", h.Reattaching)
	}
	if exited, err := s.terminate(20 * time.Second); !exited || err != nil {
		t.Fatalf("berth serve on SIGTERM during boot: exited %v, %v\n%s", exited, err, s.log)
	}
	cont()
	for _, pid := range agents {
		if !alive(pid) {
			t.Fatalf("process %d of the session not reached was killed", pid)
		}
	}

	s2 := startServer(t, home)
	var got berth.Session
	if st, err := s2.api("GET", "/v1/sessions/"+b.ID, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Fatalf("GET on the next daemon = %d %v %s (%v)", st, err, got.State, got.Failure)
	}
	var r berth.TurnResult
	if st, _ := s2.api("POST", "/v1/sessions/"+b.ID+"/prompts?wait=true", map[string]string{"text": "echo still here"}, &r); st != 200 || r.Text != "still here" {
		t.Fatalf("prompt on the next daemon = %d %+v", st, r)
	}
}
