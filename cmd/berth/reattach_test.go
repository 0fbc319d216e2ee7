package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/shim"
)

// agentPIDs returns the pids of the processes that carry a session's id.
func agentPIDs(id string) []int { return procfs.WithEnv("BERTH_SESSION_ID=" + id) }

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Live()
}

// turnEndedOf returns the turn_ended of a turn in a log, if any.
func turnEndedOf(evs []berth.Event, turnID string) (string, bool) {
	for _, ev := range evs {
		if ev.Type == berth.EventTurnEnded && ev.TurnID == turnID {
			var d struct {
				StopReason string `json:"stop_reason"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			return d.StopReason, true
		}
	}
	return "", false
}

// endedTurn waits for the turn of sess (its CurrentTurnID) to end, checks
// the log has no gap, and returns how the turn ended, how many events of
// type asked the log holds and the agent's text.
func (s *server) endedTurn(t *testing.T, sess berth.Session, asked string) (reason string, requests int, text string) {
	t.Helper()
	evs := s.waitLog(t, sess.ID, "the turn to end", func(evs []berth.Event) bool {
		_, ok := turnEndedOf(evs, sess.CurrentTurnID)
		return ok
	})
	assertContiguous(t, evs)
	var b strings.Builder
	for _, ev := range evs {
		switch ev.Type {
		case asked:
			requests++
		case berth.EventAgentMessage:
			var d struct{ Text string }
			_ = json.Unmarshal(ev.Data, &d)
			b.WriteString(d.Text)
		}
	}
	reason, _ = turnEndedOf(evs, sess.CurrentTurnID)
	return reason, requests, b.String()
}

// assertContiguous fails unless a log's seqs are 1..N.
func assertContiguous(t *testing.T, evs []berth.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: gap or duplicate", ev.Seq, i)
		}
	}
}

// ticksOf counts the demo agent's sleep ticks (".") that turn logged.
func ticksOf(evs []berth.Event, turn string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type != berth.EventAgentMessage || ev.TurnID != turn {
			continue
		}
		var d struct{ Text string }
		_ = json.Unmarshal(ev.Data, &d)
		if strings.TrimSpace(d.Text) == "." {
			n++
		}
	}
	return n
}

// A turn in flight goes on through a SIGKILL of the daemon: the agent runs
// on in its shim, the next daemon reattaches, and the turn ends end_turn
// with what the agent said after the restart, every chunk logged once
// (sleep 3000 sends a tick every 100 ms but at its end: 29).
func TestReattachContinuesATurn(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "sleep 3000\necho finished")
	// Kill mid-turn, once some ticks are logged: the rest come after.
	before := s.waitLog(t, sess.ID, "a few ticks", func(evs []berth.Event) bool {
		return ticksOf(evs, sess.CurrentTurnID) >= 3
	})
	s.kill9()
	if _, ended := turnEndedOf(before, sess.CurrentTurnID); ended {
		t.Fatal("the turn ended before the kill")
	}

	s2 := startServer(t, home)
	evs := s2.waitLog(t, sess.ID, "the turn to end", func(evs []berth.Event) bool {
		_, ok := turnEndedOf(evs, sess.CurrentTurnID)
		return ok
	})
	assertContiguous(t, evs)
	if reason, _ := turnEndedOf(evs, sess.CurrentTurnID); reason != berth.TurnEndTurn {
		t.Fatalf("turn ended %q", reason)
	}
	ticks, finished := ticksOf(evs, sess.CurrentTurnID), false
	for _, ev := range evs {
		if ev.Type != berth.EventAgentMessage || ev.TurnID != sess.CurrentTurnID {
			continue
		}
		var d struct{ Text string }
		_ = json.Unmarshal(ev.Data, &d)
		finished = finished || strings.TrimSpace(d.Text) == "finished"
	}
	if ticks != 29 || !finished {
		t.Fatalf("the turn logged %d of 29 ticks, finished %v", ticks, finished)
	}
	var got berth.Session
	s2.api("GET", "/v1/sessions/"+sess.ID, nil, &got)
	if got.State != berth.StateActive || got.CurrentTurnID != "" {
		t.Fatalf("session after the restart = %s turn %q", got.State, got.CurrentTurnID)
	}
	// The reattached session takes prompts like any other.
	var r berth.TurnResult
	if st, _ := s2.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "echo again"}, &r); st != 200 || r.Text != "again" {
		t.Fatalf("prompt after reattach = %d %+v", st, r)
	}
	s2.stop()
	assertNoProcessUnder(t, home)
}

// A permission pending when the daemon is SIGKILLed is still pending after
// the restart, under the same id, and approving it completes the turn.
func TestReattachKeepsAPendingPermission(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, map[string]any{"permission_mode": "ask"}, "ask may I\necho after")
	path := "/v1/sessions/" + sess.ID
	pending := func(s *server) []berth.Permission {
		var out struct {
			Permissions []berth.Permission `json:"permissions"`
		}
		s.api("GET", path+"/permissions?state=pending", nil, &out)
		return out.Permissions
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pending(s)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := pending(s)
	if len(before) != 1 {
		t.Fatalf("pending before the kill = %+v", before)
	}
	s.kill9()

	s2 := startServer(t, home)
	after := pending(s2)
	if len(after) != 1 || after[0].ID != before[0].ID {
		t.Fatalf("pending after the restart = %+v, want %s", after, before[0].ID)
	}
	var got berth.Session
	s2.api("GET", path, nil, &got)
	if got.State != berth.StateActive || got.PendingPermissions != 1 {
		t.Fatalf("session after the restart = %s with %d pending", got.State, got.PendingPermissions)
	}
	if st, _ := s2.api("POST", path+"/permissions/"+before[0].ID, map[string]string{"decision": "allow_once"}, nil); st != 200 {
		t.Fatalf("approve = %d", st)
	}
	if reason, requested, text := s2.endedTurn(t, sess, berth.EventPermissionRequested); reason != berth.TurnEndTurn || requested != 1 ||
		!strings.Contains(text, "permission: allow") || !strings.Contains(text, "after") {
		t.Fatalf("turn ended %q, %d requests, text %q", reason, requested, text)
	}
}

// SIGKILL the daemon, the shim and the agent together mid-turn: the next
// daemon finds nothing to reattach to, so the session is
// stopped/daemon_crashed and resumable, its log repaired (the pending tool
// call failed, the turn ended), a repair finds nothing more, and a prompt
// resumes it through session/load and is answered.
func TestShimLostFallsBackToRepairAndResume(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, map[string]any{"permission_mode": "ask"}, "ask may I")
	path := "/v1/sessions/" + sess.ID
	s.waitLog(t, sess.ID, "the permission request", func(evs []berth.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == berth.EventPermissionRequested
	})
	shims, agents := shimsOf(home), agentPIDs(sess.ID)
	if len(shims) == 0 || len(agents) == 0 {
		t.Fatalf("shims %v, agents %v", shims, agents)
	}
	s.kill9()
	for _, pid := range shims {
		procfs.KillIfEnv(pid, shim.EnvRun+"="+filepath.Join(home, "run"), false)
	}
	for _, pid := range agents {
		procfs.KillIfEnv(pid, "BERTH_SESSION_ID="+sess.ID, false)
	}

	s2 := startServer(t, home)
	// Reads answer from the store while the boot tries to reattach: the
	// session shows active until its attempt fails and it is closed.
	got := s2.waitSession(t, sess.ID, "the lost session to be closed", func(x berth.Session) bool { return x.State == berth.StateStopped })
	if got.StopReason != berth.StopDaemonCrashed || !got.Resumable {
		t.Fatalf("session after the restart = %s/%s resumable %v", got.State, got.StopReason, got.Resumable)
	}
	evs := s2.allEvents(t, sess.ID)
	assertContiguous(t, evs)
	n := len(evs)
	if n < 3 || evs[n-1].Type != berth.EventSessionStopped || evs[n-2].Type != berth.EventTurnEnded ||
		evs[n-3].Type != berth.EventToolCallUpdate || !strings.Contains(string(evs[n-3].Data), `"failed"`) {
		t.Fatalf("log ends %s, %s, %s (%s)", evs[n-3].Type, evs[n-2].Type, evs[n-1].Type, evs[n-3].Data)
	}
	var rep berth.RepairReport
	if st, _ := s2.api("POST", path+"/repair?dry_run=true", nil, &rep); st != 200 || len(rep.Issues) != 0 || len(rep.Actions) != 0 {
		t.Fatalf("repair after reconcile = %d %+v", st, rep)
	}
	var r berth.TurnResult
	if st, _ := s2.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo back"}, &r); st != 200 || r.Text != "back" {
		t.Fatalf("prompt to the crashed session = %d %+v", st, r)
	}
	evs = s2.allEvents(t, sess.ID)
	resumedBy := ""
	for _, ev := range evs[n:] {
		if ev.Type == berth.EventSessionStarted {
			var d struct {
				ResumedBy string `json:"resumed_by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			resumedBy = d.ResumedBy
		}
	}
	if resumedBy != "load" {
		t.Fatalf("resumed_by = %q, want load", resumedBy)
	}
	s2.stop()
	assertNoProcessUnder(t, home)
}

// SIGTERM to berth serve with three busy sessions: it exits 0 within 5 s,
// the agents keep running, and the next daemon reattaches all three, whose
// turns end as if nothing happened.
func TestSIGTERMLeavesAgentsToTheNextDaemon(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	var sessions []berth.Session
	for range 3 {
		sessions = append(sessions, s.busySessionWith(t, nil, "sleep 2500\necho done"))
	}
	var pids []int
	for _, sess := range sessions {
		pids = append(pids, agentPIDs(sess.ID)...)
	}
	if len(pids) < 3 {
		t.Fatalf("agent pids = %v", pids)
	}
	// The minute only turns a hang into a failure: the agents still alive
	// below show the daemon let go of them rather than stopping them.
	if exited, err := s.terminate(time.Minute); !exited || err != nil {
		t.Fatalf("berth serve on SIGTERM: exited %v, %v\n%s", exited, err, s.log)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("agent %d died with the daemon", pid)
		}
	}
	s2 := startServer(t, home)
	for _, sess := range sessions {
		evs := s2.waitLog(t, sess.ID, "the turn to end", func(evs []berth.Event) bool {
			_, ok := turnEndedOf(evs, sess.CurrentTurnID)
			return ok
		})
		assertContiguous(t, evs)
		if reason, _ := turnEndedOf(evs, sess.CurrentTurnID); reason != berth.TurnEndTurn {
			t.Fatalf("%s: turn ended %q", sess.ID, reason)
		}
		var got berth.Session
		s2.api("GET", "/v1/sessions/"+sess.ID, nil, &got)
		if got.State != berth.StateActive {
			t.Fatalf("%s after the restart = %s/%s", sess.ID, got.State, got.StopReason)
		}
	}
	// With stop_sessions_on_exit, SIGTERM stops them instead.
	s2.stop()
	s3 := startServerEnv(t, home, []string{"BERTH_SERVER_STOP_SESSIONS_ON_EXIT=true"})
	_ = s3.cmd.Process.Signal(syscall.SIGTERM)
	if err := s3.cmd.Wait(); err != nil {
		t.Fatalf("berth serve on SIGTERM: %v", err)
	}
	if left := shimsOf(home); len(left) != 0 {
		t.Fatalf("shims left with stop_sessions_on_exit: %v", left)
	}
	assertNoProcessUnder(t, home)
}

// SIGKILL while queued prompts are dispatched one after another, at a
// different moment each run: after the restart every accepted entry runs
// exactly once, in order, and no agent message lands outside a turn.
func TestSIGKILLDuringQueueDispatchLosesNoEntry(t *testing.T) {
	for run := range 4 {
		home := t.TempDir()
		s := startServer(t, home)
		sess := s.busySessionWith(t, nil, "sleep 300")
		path := "/v1/sessions/" + sess.ID
		var want []string
		for i := range 10 {
			text := "echo e" + strconv.Itoa(i)
			want = append(want, "queue:"+text)
			if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": text, "mode": "queue"}, nil); st != 202 {
				t.Fatalf("run %d: queue %d = %d", run, i, st)
			}
		}
		// Kill once 2..5 queued turns have started, a little later each run.
		k := 2 + run
		s.waitLog(t, sess.ID, "queued turns to start", func(evs []berth.Event) bool {
			return len(turnStarts(evs)) >= k
		})
		time.Sleep(time.Duration(run*700) * time.Microsecond)
		s.kill9()

		s2 := startServer(t, home)
		evs := s2.waitLog(t, sess.ID, "every queued prompt to run", func(evs []berth.Event) bool {
			ended := 0
			for _, ev := range evs {
				if ev.Type == berth.EventTurnEnded {
					ended++
				}
			}
			return ended >= 11
		})
		assertContiguous(t, evs)
		got := turnStarts(evs)
		if strings.Join(got, "|") != "user:sleep 300|"+strings.Join(want, "|") {
			t.Fatalf("run %d: turns %v", run, got)
		}
		for _, ev := range evs {
			if ev.Type == berth.EventAgentMessage && ev.TurnID == "" {
				t.Fatalf("run %d: agent message outside a turn: %s", run, ev.Data)
			}
		}
		s2.stop()
	}
}
