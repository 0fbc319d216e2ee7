package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/session/live"
)

// SIGKILL the daemon while an agent floods: the agent runs on in its shim,
// and after a restart the log is 1..N with no gap and no duplicate, holds
// every event an SSE client received, and the turn goes on to its end
// with every one of the agent's chunks logged exactly once. Repeated,
// since the moment of the kill varies.
func TestSIGKILLMidFloodLosesNothingSeen(t *testing.T) {
	crashMidFlood(t, func() []string { return nil })
}

// crashMidFlood runs the SIGKILL test five times; store gives the serve
// flags of a fresh store for each run (none: SQLite in the home).
func crashMidFlood(t *testing.T, store func() []string) {
	for run := range 5 {
		home := t.TempDir()
		args := store()
		s := startServer(t, home, args...)
		sess := s.create(t, nil)
		var r berth.PromptResult
		if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "flood 200000 64"}, &r); st != 202 {
			t.Fatalf("prompt = %d", st)
		}

		// An SSE client reads until the daemon dies under it.
		var mu sync.Mutex
		var seen []berth.Event
		done := make(chan struct{})
		events := sseEvents(context.Background(), s, sess.ID, 0)
		go func() {
			defer close(done)
			for ev := range events {
				mu.Lock()
				seen = append(seen, ev)
				mu.Unlock()
			}
		}()
		// Kill at a different point of the flood each run.
		want := 5000 + run*15000
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(seen)
			mu.Unlock()
			if n >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		s.kill9()
		<-done

		s2 := startServer(t, home, args...)
		evs := s2.waitLog(t, sess.ID, "the flood's turn to end", func(evs []berth.Event) bool {
			return len(evs) > 0 && evs[len(evs)-1].Type == berth.EventTurnEnded
		})
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("run %d: seq %d at position %d after the crash: gap or duplicate", run, ev.Seq, i)
			}
		}
		mu.Lock()
		for _, ev := range seen {
			if ev.Seq > int64(len(evs)) || evs[ev.Seq-1].Type != ev.Type || evs[ev.Seq-1].TurnID != ev.TurnID {
				mu.Unlock()
				t.Fatalf("run %d: event %d (%s) was streamed but is not in the log after the crash", run, ev.Seq, ev.Type)
			}
		}
		n := len(seen)
		mu.Unlock()
		if n < want/2 {
			t.Fatalf("run %d: only %d events streamed before the kill", run, n)
		}
		if chunks := floodChunks(evs, r.TurnID); chunks.n != 200000 {
			t.Fatalf("run %d: %d of the agent's 200000 chunks logged: lost or doubled across the restart (%d events seen before the kill; %s)",
				run, chunks.n, n, chunks)
		}
		var end struct {
			StopReason string `json:"stop_reason"`
		}
		_ = json.Unmarshal(evs[len(evs)-1].Data, &end)
		if evs[len(evs)-1].TurnID != r.TurnID || end.StopReason != berth.TurnEndTurn {
			t.Fatalf("run %d: the turn ended %+v", run, evs[len(evs)-1])
		}
		var got berth.Session
		s2.api("GET", "/v1/sessions/"+sess.ID, nil, &got)
		if got.State != berth.StateActive {
			t.Fatalf("run %d: session after the restart = %s/%s", run, got.State, got.StopReason)
		}
		if st, _ := s2.api("POST", "/v1/sessions/"+sess.ID+"/stop", nil, nil); st != 200 {
			t.Fatalf("run %d: stop = %d", run, st)
		}
		s2.stop()
		assertNoProcessUnder(t, home)
	}
}

// floodCount is what a log holds of a flood turn's chunks, and what it
// warned of: what a failure of crashMidFlood says.
type floodCount struct {
	n, first, last int64
	warnings       []string
	// truncated: a warning says the cap dropped output.
	truncated bool
}

// floodChunks counts the agent_message events of turn turnID in evs.
func floodChunks(evs []berth.Event, turnID string) floodCount {
	var c floodCount
	for _, ev := range evs {
		switch {
		case ev.Type == berth.EventAgentMessage && ev.TurnID == turnID:
			if c.n == 0 {
				c.first = ev.Seq
			}
			c.n++
			c.last = ev.Seq
		case ev.Type == berth.EventRuntimeWarning:
			c.warnings = append(c.warnings, fmt.Sprintf("seq %d: %s", ev.Seq, ev.Data))
			var d struct{ Reason string }
			c.truncated = c.truncated || (json.Unmarshal(ev.Data, &d) == nil && d.Reason == live.ReasonOutputTruncated)
		}
	}
	return c
}

// String says where the chunks are and the warnings logged.
func (c floodCount) String() string {
	return fmt.Sprintf("chunks at seqs %d..%d; runtime warnings: %q", c.first, c.last, c.warnings)
}

// A daemon SIGKILLed far behind its agent (stopped while the agent wrote a
// whole flood to its shim) counts the turn's output once after the
// restart, the part it reads again included: with limits.max_turn_output
// just over what the turn costs the log, every chunk is logged and nothing
// is truncated. Counting again what the shim had counted crossed the cap
// and dropped the rest of the flood.
func TestRestartBehindAFloodCountsTheTurnOnce(t *testing.T) {
	home := t.TempDir()
	// 3,000 chunks of 64 bytes count 331 bytes each (their stored size,
	// session/live storedSize): 993,000 of the 1 MiB, ticks and the
	// permission's tool call leave some 50 KB to spare.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[limits]\nmax_turn_output = 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	sess := s.create(t, map[string]any{"permission_mode": "ask"})
	var r berth.PromptResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "sleep 2000\nflood 3000 64\nask may I"}, &r); st != 202 {
		t.Fatalf("prompt = %d", st)
	}
	// Stopped at the sleep's first tick, the daemon reads nothing of the
	// flood: its shim spools it all, up to the permission request.
	s.waitLog(t, sess.ID, "the sleep's first tick", func(evs []berth.Event) bool { return ticksOf(evs, r.TurnID) > 0 })
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	spooled := func() bool {
		paths, _ := filepath.Glob(filepath.Join(home, "run", sess.ID+".*.spool"))
		for _, p := range paths {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(acp.MethodRequestPermission)) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !spooled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.kill9()
	if !spooled() {
		t.Fatal("the agent's permission request never reached its shim's spool")
	}

	// The permission is asked again, unless the cap refused it.
	s2 := startServer(t, home)
	var perms struct {
		Permissions []berth.Permission `json:"permissions"`
	}
	ended := func(evs []berth.Event) bool {
		_, ok := turnEndedOf(evs, r.TurnID)
		return ok
	}
	evs := s2.waitLog(t, sess.ID, "the permission asked again", func(evs []berth.Event) bool {
		s2.api("GET", "/v1/sessions/"+sess.ID+"/permissions?state=pending", nil, &perms)
		return len(perms.Permissions) == 1 || ended(evs)
	})
	if !ended(evs) {
		if st, _ := s2.api("POST", "/v1/sessions/"+sess.ID+"/permissions/"+perms.Permissions[0].ID, map[string]string{"decision": "allow_once"}, nil); st != 200 {
			t.Fatalf("approve = %d", st)
		}
		evs = s2.waitLog(t, sess.ID, "the turn to end", ended)
	}
	assertContiguous(t, evs)
	flood := 0
	for _, ev := range evs {
		var d struct{ Text string }
		if ev.Type == berth.EventAgentMessage && ev.TurnID == r.TurnID && json.Unmarshal(ev.Data, &d) == nil && d.Text == strings.Repeat("x", 64) {
			flood++
		}
	}
	// Other warnings may come (an unprivileged run's long home has no
	// room for the berth MCP socket): none about the cap.
	if c := floodChunks(evs, r.TurnID); flood != 3000 || c.truncated {
		t.Fatalf("%d of the flood's 3000 chunks logged: %s", flood, c)
	}
}
