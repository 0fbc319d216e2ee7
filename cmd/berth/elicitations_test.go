package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// pendingAsk polls a session's list of noun (permissions, elicitations)
// until one of them is pending, and returns the first.
func pendingAsk[T any](t *testing.T, s *server, id, noun string) T {
	t.Helper()
	var items []T
	testenv.WaitFor(t, 20*time.Second, "a pending one of "+noun, func() bool {
		var list map[string]json.RawMessage
		if st, err := s.api("GET", "/v1/sessions/"+id+"/"+noun+"?state=pending", nil, &list); st != 200 {
			t.Fatalf("list %s = %d %v", noun, st, err)
		}
		return json.Unmarshal(list[noun], &items) == nil && len(items) > 0
	})
	return items[0]
}

func TestElicitationsOverHTTPAndTheCLI(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	cli := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"--addr", s.addr}, args...)...)
		c.Env = cleanEnv(home)
		return c
	}
	sess := s.create(t, nil)
	path := "/v1/sessions/" + sess.ID
	var r berth.PromptResult
	if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": "elicit What is your name?"}, &r); st != 202 {
		t.Fatalf("prompt = %d", st)
	}
	el := pendingAsk[berth.Elicitation](t, s, sess.ID, "elicitations")
	if el.Message != "What is your name?" || el.Mode != "form" || el.TurnID != r.TurnID {
		t.Fatalf("elicitation: %+v", el)
	}
	var got berth.Session
	if s.api("GET", path, nil, &got); got.Badge != berth.BadgeWaiting || got.PendingElicitations != 1 {
		t.Fatalf("session while asking: %s %d", got.Badge, got.PendingElicitations)
	}
	var one berth.Elicitation
	if st, _ := s.api("GET", path+"/elicitations/"+el.ID, nil, &one); st != 200 || one.ID != el.ID || one.State != "pending" {
		t.Fatalf("get = %d %+v", st, one)
	}
	var e errorBody
	if st, _ := s.api("GET", path+"/elicitations/elic_nope", nil, &e); st != 404 {
		t.Fatalf("get unknown = %d", st)
	}
	if st, _ := s.api("POST", path+"/elicitations/elic_nope", `{"action":"decline"}`, &e); st != 404 {
		t.Fatalf("answer unknown = %d", st)
	}
	if st, _ := s.api("POST", path+"/elicitations/"+el.ID, `{"action":"accept","content":{"answer":7}}`, &e); st != 400 ||
		e.Error.Code != "invalid_argument" || !strings.Contains(e.Error.Message, "answer") {
		t.Fatalf("content of the wrong type = %d %+v", st, e)
	}
	if st, _ := s.api("POST", path+"/elicitations/"+el.ID, `{"action":"accept","content":{}}`, &e); st != 400 || !strings.Contains(e.Error.Message, "content.answer") {
		t.Fatalf("missing required field = %d %+v", st, e)
	}
	if st, _ := s.api("POST", path+"/elicitations/"+el.ID, `{"action":"shrug"}`, &e); st != 400 {
		t.Fatalf("bad action = %d", st)
	}
	if st, _ := s.api("GET", path+"/elicitations?state=weird", nil, &e); st != 400 {
		t.Fatalf("bad state = %d", st)
	}

	// The CLI lists it and answers it.
	out, err := cli("elicitations", sess.ID, "--pending").CombinedOutput()
	if err != nil || !strings.Contains(string(out), el.ID) || !strings.Contains(string(out), "What is your name?") || !strings.Contains(string(out), "answer* string") {
		t.Fatalf("berth elicitations: %v\n%s", err, out)
	}
	out, err = cli("answer", sess.ID, el.ID, "--field", "answer=Ada Lovelace").CombinedOutput()
	if err != nil || !strings.Contains(string(out), el.ID+": accepted") {
		t.Fatalf("berth answer: %v\n%s", err, out)
	}
	evs := s.waitLog(t, sess.ID, "the turn to end", func(evs []berth.Event) bool {
		return evs[len(evs)-1].Type == berth.EventTurnEnded
	})
	if !strings.Contains(string(evs[len(evs)-2].Data), "answer: Ada Lovelace") {
		t.Fatalf("the agent's answer: %s", evs[len(evs)-2].Data)
	}
	if st, _ := s.api("POST", path+"/elicitations/"+el.ID, `{"action":"decline"}`, &e); st != 409 {
		t.Fatalf("second answer = %d", st)
	}
	again := cli("answer", sess.ID, el.ID, "--decline")
	if err := again.Run(); exitCodeOf(err) != 4 {
		t.Fatalf("second berth answer exited %d, want 4 (conflict)", exitCodeOf(err))
	}

	// --decline reaches the agent.
	s.api("POST", path+"/prompts", map[string]string{"text": "elicit Proceed?"}, &r)
	el = pendingAsk[berth.Elicitation](t, s, sess.ID, "elicitations")
	if out, err := cli("answer", sess.ID, el.ID, "--decline").CombinedOutput(); err != nil || !strings.Contains(string(out), "declined") {
		t.Fatalf("berth answer --decline: %v\n%s", err, out)
	}
	evs = s.waitLog(t, sess.ID, "the second turn to end", func(evs []berth.Event) bool {
		return evs[len(evs)-1].Type == berth.EventTurnEnded && evs[len(evs)-1].TurnID == r.TurnID
	})
	if !strings.Contains(string(evs[len(evs)-2].Data), "elicitation decline") {
		t.Fatalf("after decline: %s", evs[len(evs)-2].Data)
	}
	if err := cli("answer", sess.ID, el.ID, "--decline", "--cancel").Run(); exitCodeOf(err) != 2 {
		t.Fatalf("--decline --cancel exited %d, want 2", exitCodeOf(err))
	}
}

func TestRunAsksAnElicitationAtTheTerminal(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(bin, "run", "elicit What is your name?")
	cmd.Env = cleanEnv(home)
	// An empty line for a required field is asked again.
	cmd.Stdin = strings.NewReader("\nGrace\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("berth run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "answer: Grace") {
		t.Fatalf("stdout %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "? What is your name?") || !strings.Contains(stderr.String(), "Answer (answer) [string]") ||
		!strings.Contains(stderr.String(), "required") {
		t.Fatalf("the question was not put: %q", stderr.String())
	}
	assertNoProcessUnder(t, home)
}

func TestAttachAnswersAnElicitation(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, nil)
	env := s.cliEnv("NO_COLOR=1", "TERM=dumb")
	tm := startTerminal(t, env, "attach", sess.ID)
	tm.waitFor("attached to " + sess.ID)
	tm.typeLine("elicit Favourite colour?")
	tm.waitFor("Answer (answer) [string]:")
	tm.typeLine("teal")
	tm.waitFor("answer: teal")
	tm.typeLine("elicit Again?")
	tm.waitFor("? Again?")
	tm.typeLine("/decline")
	tm.waitFor("elicitation decline")
	var list struct{ Elicitations []berth.Elicitation }
	s.api("GET", "/v1/sessions/"+sess.ID+"/elicitations", nil, &list)
	if len(list.Elicitations) != 2 || list.Elicitations[0].State != "accepted" || list.Elicitations[1].State != "declined" {
		t.Fatalf("elicitations: %+v", list.Elicitations)
	}
}

// A daemon killed with SIGKILL while an elicitation waits: its agent runs
// on in its shim, and the next daemon serves the same elicitation (same
// id, one elicitation_requested); answering it there finishes the turn.
func TestReattachKeepsAPendingElicitation(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "elicit Your name?\necho after")
	path := "/v1/sessions/" + sess.ID
	before := pendingAsk[berth.Elicitation](t, s, sess.ID, "elicitations")
	s.kill9()

	s2 := startServer(t, home)
	after := pendingAsk[berth.Elicitation](t, s2, sess.ID, "elicitations")
	if after.ID != before.ID {
		t.Fatalf("pending after the restart = %+v, want %s", after, before.ID)
	}
	var got berth.Session
	deadline := time.Now().Add(10 * time.Second)
	for s2.api("GET", path, nil, &got); got.PendingElicitations != 1 && time.Now().Before(deadline); s2.api("GET", path, nil, &got) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.State != berth.StateActive || got.PendingElicitations != 1 || got.Badge != berth.BadgeWaiting {
		t.Fatalf("session after the restart = %s/%s with %d pending", got.State, got.Badge, got.PendingElicitations)
	}
	if st, _ := s2.api("POST", path+"/elicitations/"+before.ID, map[string]any{"action": "accept", "content": map[string]any{"answer": "Lin"}}, nil); st != 200 {
		t.Fatalf("answer = %d", st)
	}
	if reason, requested, text := s2.endedTurn(t, sess, berth.EventElicitationRequested); reason != berth.TurnEndTurn || requested != 1 ||
		!strings.Contains(text, "answer: Lin") || !strings.Contains(text, "after") {
		t.Fatalf("turn ended %q, %d requests, text %q", reason, requested, text)
	}
}
