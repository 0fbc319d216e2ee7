package hooks

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// The chat example of docs/api.md works: its script, run as a command hook,
// posts {"text"} to a webhook for badge:waiting and turn_ended.
func TestDocsChatExample(t *testing.T) {
	for _, tool := range []string{"jq", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "the docs' chat hook example needs it (Debian package %s)", tool)
		}
	}
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```sh\n#!/bin/sh\n# A berth command hook")
	script, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/api.md has no chat hook script")
	}
	path := filepath.Join(t.TempDir(), "chat.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n# A berth command hook"+script), 0o700); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, nil)
	e := newEnv(t)
	e.session("ses_a", "demo", nil)
	e.start(testOptions(), Hook{Name: "chat", Command: path, Args: []string{rc.srv.URL + "/services/T0/B0/X"},
		Events: []string{"badge:waiting", berth.EventTurnEnded}})
	waitFor(t, "the first badge recorded", func() bool {
		c, ok, _ := e.store.GetHookCursor(t.Context(), "ses_a")
		return ok && c.Badge == berth.BadgeIdle
	})
	s, _ := e.store.GetSession(t.Context(), "ses_a")
	s.Badge = berth.BadgeWaiting
	b, _ := json.Marshal(s)
	e.feed.Publish(berth.ChangeSessionUpdated, b)
	waitFor(t, "the waiting message", func() bool { return len(rc.requests()) == 1 })
	ev := berth.NewEvent("ses_a", "turn_1", berth.EventTurnEnded, map[string]string{"stop_reason": "end_turn"})
	ev.Seq = 1
	if err := e.store.AppendEvents(t.Context(), []berth.Event{ev}); err != nil {
		t.Fatal(err)
	}
	e.svc.Notify("ses_a")
	waitFor(t, "the turn message", func() bool { return len(rc.requests()) == 2 })
	var texts []string
	for _, r := range rc.requests() {
		var m struct{ Text string }
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("webhook body %q: %v", r.body, err)
		}
		texts = append(texts, m.Text)
	}
	if texts[0] != "berth: ⏳ ses_a is waiting for you (permission or question)" || texts[1] != "berth: ✅ ses_a finished a turn: end_turn" {
		t.Fatalf("messages %q", texts)
	}
}
