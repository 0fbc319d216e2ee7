package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// turnStarts lists a log's turn_started events as "source:text".
func turnStarts(evs []berth.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type != berth.EventTurnStarted {
			continue
		}
		var d struct{ Text, Source string }
		_ = json.Unmarshal(ev.Data, &d)
		out = append(out, d.Source+":"+d.Text)
	}
	return out
}

func TestQueueOverHTTP(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.busySession(t, nil)
	path := "/v1/sessions/" + sess.ID
	var entries []berth.PromptResult
	for i := range 10 {
		var r berth.PromptResult
		if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": fmt.Sprintf("echo e%d", i), "mode": "queue"}, &r); st != 202 || r.Status != "queued" || r.Position != i+1 {
			t.Fatalf("queue %d = %d %+v", i, st, r)
		}
		entries = append(entries, r)
	}
	var e errorBody
	if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": "echo e10"}, &e); st != 429 || e.Error.Code != "queue_full" {
		t.Fatalf("11th = %d %+v", st, e)
	}
	var q berth.QueueView
	if st, _ := s.api("GET", path+"/queue", nil, &q); st != 200 || len(q.Entries) != 10 || q.Entries[9].Text != "echo e9" {
		t.Fatalf("queue = %d %+v", st, q)
	}
	var canceled struct{ Status string }
	if st, _ := s.api("DELETE", path+"/queue/"+entries[0].EntryID, nil, &canceled); st != 200 || canceled.Status != "canceled" {
		t.Fatalf("delete = %d %+v", st, canceled)
	}
	if st, _ := s.api("DELETE", path+"/queue/"+entries[0].EntryID, nil, nil); st != 404 {
		t.Fatalf("delete again = %d", st)
	}
	// Steer on a busy session is staged; a queued prompt with ?wait=true
	// answers with its own turn.
	var staged berth.PromptResult
	if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": "echo steered", "mode": "steer"}, &staged); st != 202 || staged.Status != "staged" {
		t.Fatalf("steer = %d %+v", st, staged)
	}
	if st, _ := s.api("POST", path+"/cancel", nil, nil); st != 202 {
		t.Fatalf("cancel = %d", st)
	}
	var res struct {
		berth.TurnResult
		Error *struct{ Code, Message string } `json:"error"`
	}
	if st, err := s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo last"}, &res); st != 200 || res.Text != "last" {
		t.Fatalf("queued wait = %d %+v %+v %v", st, res.TurnResult, res.Error, err)
	}
	want := []string{"user:sleep 60000", "steer:echo steered"}
	for i := 1; i < 10; i++ {
		want = append(want, fmt.Sprintf("queue:echo e%d", i))
	}
	want = append(want, "queue:echo last")
	if got := turnStarts(s.allEvents(t, sess.ID)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("turns:\n got %v\nwant %v", got, want)
	}
	// Idle: steer is a conflict, interrupt just starts.
	if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": "echo x", "mode": "steer"}, &e); st != 409 {
		t.Fatalf("idle steer = %d", st)
	}
}

func TestPermissionsOverHTTPAndApprove(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, map[string]any{"permission_mode": "ask"})
	path := "/v1/sessions/" + sess.ID
	ask := func() (berth.PromptResult, berth.Permission) {
		var r berth.PromptResult
		if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": "ask delete everything"}, &r); st != 202 {
			t.Fatalf("prompt = %d", st)
		}
		return r, pendingAsk[berth.Permission](t, s, sess.ID, "permissions")
	}
	r, p := ask()
	var got berth.Session
	if s.api("GET", path, nil, &got); got.Badge != berth.BadgeWaiting || got.PendingPermissions != 1 {
		t.Fatalf("session while asking: %s %d", got.Badge, got.PendingPermissions)
	}
	var e errorBody
	if st, _ := s.api("POST", path+"/permissions/"+p.ID, `{"decision":"perhaps"}`, &e); st != 400 || e.Error.Code != "invalid_argument" {
		t.Fatalf("bad decision = %d %+v", st, e)
	}
	var decided berth.Permission
	if st, _ := s.api("POST", path+"/permissions/"+p.ID, `{"decision":"allow_once"}`, &decided); st != 200 || decided.DecidedBy != "user" || decided.State != "decided" {
		t.Fatalf("decide = %d %+v", st, decided)
	}
	if st, _ := s.api("POST", path+"/permissions/"+p.ID, `{"option_id":"reject"}`, &e); st != 409 {
		t.Fatalf("second decision = %d", st)
	}
	evs := s.waitLog(t, sess.ID, "the turn to end", func(evs []berth.Event) bool {
		return evs[len(evs)-1].Type == berth.EventTurnEnded
	})
	if last := evs[len(evs)-1]; last.TurnID != r.TurnID || !strings.Contains(string(last.Data), "end_turn") {
		t.Fatalf("turn end: %+v", last)
	}

	// The CLI answers the next one with --reject.
	_, p = ask()
	cmd := exec.Command(bin, "--addr", s.addr, "approve", sess.ID, p.ID, "--reject")
	cmd.Env = cleanEnv(s.home)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), p.ID+": decided (option reject)") {
		t.Fatalf("berth approve --reject: %v %s", err, out)
	}
	again := exec.Command(bin, "--addr", s.addr, "approve", sess.ID, p.ID)
	again.Env = cleanEnv(s.home)
	if err := again.Run(); exitCodeOf(err) != 4 {
		t.Fatalf("second approve exited %d, want 4 (conflict)", exitCodeOf(err))
	}
}

// exitCodeOf returns a child's exit code (0 for nil).
func exitCodeOf(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestRunAskAnswersAtTheTerminal(t *testing.T) {
	for _, c := range []struct{ mode, input, want string }{
		{"ask", "Always allow\n", "permission: allow_always"},
		{"ask", "what?\n3\n", "permission: rejected"},
		// approve-reads, the default, asks for an edit too.
		{"", "1\n", "permission: allow"},
	} {
		home := t.TempDir()
		args := []string{"run", "ask delete everything"}
		if c.mode != "" {
			args = []string{"run", "--permissions", c.mode, "ask delete everything"}
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv(home)
		cmd.Stdin = strings.NewReader(c.input)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("berth %v (%q): %v\nstdout %s\nstderr %s", args, c.input, err, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), c.want) {
			t.Fatalf("answer %q: stdout %q, want %q", c.input, stdout.String(), c.want)
		}
		if !strings.Contains(stderr.String(), "? delete everything") || !strings.Contains(stderr.String(), "2) Always allow") {
			t.Fatalf("the question was not put: %q", stderr.String())
		}
		assertNoProcessUnder(t, home)
	}
}

// SIGKILL the daemon while two prompts are queued: after the restart both
// still run, once each, in order — after the turn in flight, which the
// agent went on with in its shim.
func TestQueuedPromptsSurviveSIGKILL(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "sleep 1500")
	path := "/v1/sessions/" + sess.ID
	for _, text := range []string{"echo one", "echo two"} {
		if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": text}, nil); st != 202 {
			t.Fatalf("queue %q = %d", text, st)
		}
	}
	s.kill9()
	s = startServer(t, home)
	evs := s.waitLog(t, sess.ID, "both queued prompts to run", func(evs []berth.Event) bool {
		ended := 0
		for _, ev := range evs {
			if ev.Type == berth.EventTurnEnded {
				ended++
			}
		}
		return ended == 3
	})
	want := "user:sleep 1500|queue:echo one|queue:echo two"
	if got := strings.Join(turnStarts(evs), "|"); got != want {
		t.Fatalf("turns = %s, want %s", got, want)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("gap at %d", i)
		}
	}
	var q berth.QueueView
	if st, _ := s.api("GET", path+"/queue", nil, &q); st != 200 || len(q.Entries) != 0 {
		t.Fatalf("queue after = %d %+v", st, q)
	}
	// Nothing else runs later: a last prompt, run to its end, is the very
	// next turn (one already due would have started before it).
	var last berth.TurnResult
	if st, _ := s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo last"}, &last); st != 200 || last.Text != "last" {
		t.Fatalf("last prompt = %d %+v", st, last)
	}
	if got := strings.Join(turnStarts(s.allEvents(t, sess.ID)), "|"); got != want+"|user:echo last" {
		t.Fatalf("turns later = %s", got)
	}
}

// runUntilOutput starts `berth run` and waits until its stdout has
// something, so the turn is under way.
func runUntilOutput(t *testing.T, home string, args ...string) (*exec.Cmd, *testenv.Buffer, *testenv.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run"}, args...)...)
	cmd.Env = cleanEnv(home)
	stdout, stderr := &testenv.Buffer{}, &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for stdout.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("berth run printed nothing: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, stdout, stderr
}

// waitExit waits for a child to exit and returns its state.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) *os.ProcessState {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState
	case <-time.After(within):
		t.Fatalf("berth run did not exit within %s", within)
		return nil
	}
}

func TestRunCtrlCCancelsTheTurnAndASecondExits(t *testing.T) {
	home := t.TempDir()
	// One Ctrl-C: the turn is cancelled, run reports it and exits 1.
	cmd, _, stderr := runUntilOutput(t, home, "sleep 60000")
	_ = cmd.Process.Signal(os.Interrupt)
	st := waitExit(t, cmd, 10*time.Second)
	if st.ExitCode() != 1 || !strings.Contains(stderr.String(), "cancelled") {
		t.Fatalf("after one Ctrl-C: exit %d, stderr %q", st.ExitCode(), stderr.String())
	}
	// A turn that ignores the cancel: the second Ctrl-C exits at once.
	cmd, _, _ = runUntilOutput(t, home, "echo start\nhang")
	_ = cmd.Process.Signal(os.Interrupt)
	time.Sleep(300 * time.Millisecond)
	_ = cmd.Process.Signal(os.Interrupt)
	st = waitExit(t, cmd, 5*time.Second)
	if st.Success() {
		t.Fatal("berth run exited 0 after two Ctrl-C")
	}
	// Its agent does not outlive it: the connection's end ends the agent.
	assertNoProcessUnder(t, home)
}

func TestExecOverHTTPAndCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	var res berth.ExecResult
	// sleep 1000 ends only by the 1 s timeout (TimedOut says so).
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"command": []string{"sleep", "1000"}, "timeout_seconds": 1}, &res); st != 200 || !res.TimedOut {
		t.Fatalf("exec sleep 1000 = %d %+v", st, res)
	}
	cmd := exec.Command(bin, "--addr", s.addr, "exec", sess.ID, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	cmd.Env = cleanEnv(s.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if exitCodeOf(err) != 7 || stdout.String() != "out\n" || !strings.Contains(stderr.String(), "err\n") {
		t.Fatalf("berth exec: exit %d, stdout %q, stderr %q", exitCodeOf(err), stdout.String(), stderr.String())
	}
	// The exec event is appended without waiting for its commit: poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, ev := range s.allEvents(t, sess.ID) {
			if ev.Type == berth.EventExec {
				n++
			}
		}
		if n == 2 {
			break
		}
		if n > 2 || time.Now().After(deadline) {
			t.Fatalf("%d exec events, want 2", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
