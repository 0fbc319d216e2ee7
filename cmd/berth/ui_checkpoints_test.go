package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// The session page lists the checkpoints; Rewind (asked twice) restores
// the workspace, Fork opens the new session made from a checkpoint.
func TestUICheckpointsRewindAndFork(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	for _, text := range []string{"write a.txt one", "write a.txt two"} {
		if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": text}, nil); st != 202 && st != 200 || err != nil {
			t.Fatalf("prompt %q: %d %v", text, st, err)
		}
	}
	var sess berth.Session
	s.api("GET", "/v1/sessions/"+id, nil, &sess)
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("two checkpoints", `document.querySelectorAll('.checkpoints li').length == 2`)
	rewind := `//button[@aria-label='Rewind to before turn 2']`
	tab.Run(browsertest.Click(rewind))
	tab.WaitFor("the confirmation", `!!document.evaluate("//button[@aria-label='Confirm rewind to before turn 2']", document, null, 9, null).singleNodeValue`)
	if b, _ := os.ReadFile(filepath.Join(sess.Workspace, "a.txt")); string(b) != "two" {
		t.Fatalf("rewound before the confirmation: %q", b)
	}
	tab.Run(browsertest.Click(`//button[@aria-label='Confirm rewind to before turn 2']`))
	tab.WaitFor("the rewind's note", `document.querySelector('[role=status]') && [...document.querySelectorAll('[role=status]')].some(e => e.textContent.includes('Workspace rewound to before turn 2'))`)
	tab.WaitFor("workspace_rewound in the transcript", transcriptHas("Workspace rewound to"))
	if b, _ := os.ReadFile(filepath.Join(sess.Workspace, "a.txt")); string(b) != "one" {
		t.Fatalf("a.txt after the rewind: %q", b)
	}
	shot(t, tab, "checkpoints")
	if dir := os.Getenv("BERTH_UI_SHOT_DIR"); dir != "" {
		tab.Screenshot(filepath.Join(dir, "checkpoints.png"))
	}
	tab.Run(browsertest.Click(`//button[@aria-label='Fork from before turn 2']`))
	tab.WaitFor("the fork's page", `location.pathname.startsWith('/sessions/') && !location.pathname.endsWith('`+id+`')`)
	var path string
	tab.Run(chromedp.Evaluate(`location.pathname`, &path))
	forkID := strings.TrimPrefix(path, "/sessions/")
	// The fork's page says where it came from, with a link to its parent,
	// and shows the conversation it carries: the parent's first turn.
	tab.WaitFor("where the fork came from", fmt.Sprintf(`(o => o && o.textContent == 'Forked from %s before turn 2 (“write a.txt two”)' && o.querySelector('a').getAttribute('href') == '/sessions/%s')(document.querySelector('.fork-origin'))`, id, id))
	tab.WaitFor("the conversation it carries", `[...document.querySelectorAll('.carried .ev.agent-message')].some(e => e.innerText.includes('wrote a.txt'))`)
	var carried []string
	tab.Eval(`[...document.querySelectorAll('.carried .ev.prompt .user-text')].map(e => e.textContent)`, &carried)
	if len(carried) != 1 || carried[0] != "write a.txt one" {
		t.Fatalf("the fork carries the prompts %q, want the first turn's alone", carried)
	}
	shot(t, tab, "fork")
	deadline := time.Now().Add(20 * time.Second)
	for {
		var fork berth.Session
		if st, _ := s.api("GET", "/v1/sessions/"+forkID, nil, &fork); st == 200 && fork.ForkedFrom != nil && fork.ForkedFrom.SessionID == id {
			if b, _ := os.ReadFile(filepath.Join(fork.Workspace, "a.txt")); string(b) != "one" {
				t.Fatalf("the fork's a.txt: %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fork %s of %s", forkID, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	noPageErrors(t, tab)
}

// A checkpoint pruned while the session's page is open — by its child's
// turn, the page's session idle — leaves its Checkpoints panel and is told
// in the transcript as it happens.
func TestUICheckpointPrunedLive(t *testing.T) {
	b := browsertest.New(t)
	home := t.TempDir()
	// The parent's first (empty) checkpoint and one of 20 KiB fit; the
	// child's of 20 KiB more does not.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[checkpoints]\nmax_tree_bytes = 40960\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	id := createSession(t, s, map[string]any{})
	var kid berth.Session
	if st, err := s.api("POST", "/v1/sessions/"+id+"/children", map[string]any{"agent": "demo", "ttl_seconds": 300}, &kid); st != 201 {
		t.Fatalf("spawn = %d %v", st, err)
	}
	turn := func(sid string) {
		if st, err := s.api("POST", "/v1/sessions/"+sid+"/prompts?wait=true", map[string]any{"text": "run head -c 20480 /dev/urandom > a"}, nil); st != 200 || err != nil {
			t.Fatalf("prompt: %d %v", st, err)
		}
	}
	turn(id)
	turn(id)
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("two checkpoints", `document.querySelectorAll('.checkpoints li').length == 2`)
	turn(kid.ID)
	tab.WaitFor("checkpoint_pruned in the transcript", logHas("checkpoint_pruned"))
	tab.WaitFor("no checkpoint left", `document.querySelectorAll('.checkpoints li').length == 0`)
	noPageErrors(t, tab)
}
