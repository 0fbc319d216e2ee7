package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// berth serve --store memory: runs a session through a turn like any
// store: create, prompt, and the whole log read back in order. It warns
// at start that nothing survives it, and on SIGTERM stops the sessions
// rather than leaving agents in shims that no store could reattach.
func TestServeWithAMemoryStore(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, "--store", "memory:")
	var h berth.Health
	if st, _ := s.api("GET", "/v1/health", nil, &h); st != 200 || h.Store != "memory" {
		t.Fatalf("health = %d %+v", st, h)
	}
	sess := s.create(t, nil)
	var r berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "echo hello memory"}, &r); st != 200 || err != nil {
		t.Fatalf("prompt = %d %v", st, err)
	}
	if r.StopReason != "end_turn" || !strings.Contains(r.Text, "hello memory") {
		t.Fatalf("turn = %+v", r)
	}
	evs := s.allEvents(t, sess.ID)
	types := map[string]bool{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("log not contiguous at %d: %+v", i, evs)
		}
		types[ev.Type] = true
	}
	for _, want := range []string{berth.EventSessionCreated, berth.EventAgentMessage, berth.EventTurnEnded} {
		if !types[want] {
			t.Fatalf("log has no %s: %+v", want, evs)
		}
	}
	var got berth.Session
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID, nil, &got); st != 200 || got.LastSeq != evs[len(evs)-1].Seq || got.Turns != 1 {
		t.Fatalf("session = %d %+v, last event %d", st, got, evs[len(evs)-1].Seq)
	}

	// SIGTERM: the daemon exits and no shim of the home outlives it.
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve on SIGTERM: %v\n%s", err, s.log)
	}
	if !strings.Contains(s.log.String(), "lost when the daemon exits") {
		t.Errorf("no warning that the memory store keeps nothing:\n%s", s.log)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(shimsOf(home)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("shims %v outlived a daemon with a memory store\n%s", shimsOf(home), s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The config file's [store] url says the same; the next daemon starts
	// empty, and doctor warns that the store keeps nothing.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[store]\nurl = \"memory:\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, home)
	var list berth.SessionPage
	if st, _ := s2.api("GET", "/v1/sessions", nil, &list); st != 200 || len(list.Sessions) != 0 {
		t.Fatalf("a new daemon on a memory store lists %d sessions (%d)", len(list.Sessions), st)
	}
	rep, _ := doctor(t, home, "BERTH_ADDR="+s2.addr)
	if c := checkOf(t, rep, "store"); c.Status != checkWarn || !strings.Contains(c.Detail, "lost when the daemon exits") {
		t.Fatalf("doctor store check = %+v", c)
	}
}
