package session

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// An agent that cannot reopen a conversation (no session/load, no
// session/resume) gets a new one on resume, and its first prompt carries
// the transcript so far: the demo agent echoes plain text back, so its
// answer shows what it was given. The log keeps the user's prompt only.
func TestResumeWithoutLoadCarriesTheTranscript(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-noload"})
	if r := e.prompt(s.ID, "echo the password is swordfish"); r.Text != "the password is swordfish" {
		t.Fatalf("first turn: %+v", r)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	r := e.prompt(s.ID, "what was the password?")
	if !strings.Contains(r.Text, "User: echo the password is swordfish") ||
		!strings.Contains(r.Text, "Assistant: the password is swordfish") || !strings.HasSuffix(r.Text, "what was the password?") {
		t.Fatalf("the first prompt after resume did not carry the transcript: %q", r.Text)
	}
	// Only the first prompt carries it.
	if r := e.prompt(s.ID, "echo plain"); r.Text != "plain" {
		t.Fatalf("second prompt after resume: %q", r.Text)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	started := ofType(evs, berth.EventSessionStarted)
	if len(started) != 2 || !strings.Contains(string(started[1].Data), `"resumed_by":"transcript"`) {
		t.Fatalf("session_started events: %v", started)
	}
	for _, ev := range ofType(evs, berth.EventTurnStarted) {
		if strings.Contains(string(ev.Data), "berth: this session was resumed") {
			t.Fatalf("the transcript leaked into the log: %s", ev.Data)
		}
	}
}
