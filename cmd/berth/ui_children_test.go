package main

import (
	"fmt"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
)

// The sessions list draws a child under its parent from parent_id, one
// level in, and follows the child's stop (parent_stopped) live; a child's
// page links its parent.
func TestUIChildrenUnderTheirParent(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	parent := createSession(t, s, map[string]any{"name": "the-parent"})
	var kid struct {
		ID string `json:"id"`
	}
	if st, err := s.api("POST", "/v1/sessions/"+parent+"/children", map[string]any{"agent": "demo", "name": "the-kid", "ttl_seconds": 600}, &kid); st != 201 || err != nil {
		t.Fatalf("spawn: %d %v", st, err)
	}
	// Created after the child: newest first, it would come before both.
	createSession(t, s, map[string]any{"name": "a-later-root"})

	tab := uiPage(t, b, s, "/")
	kidRow := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, kid.ID)
	tab.WaitFor("the child right under its parent, one level in", fmt.Sprintf(
		`(() => { const p = document.querySelector('tr[data-id=%q]'); const k = %s;
			return p && k && p.nextElementSibling === k && k.classList.contains('child') && k.classList.contains('depth-1') })()`,
		parent, kidRow))
	if st, err := s.api("POST", "/v1/sessions/"+parent+"/stop", nil, nil); st != 200 || err != nil {
		t.Fatalf("stop the parent: %d %v", st, err)
	}
	tab.WaitFor("the child's row to show it stopped", kidRow+`.querySelector('.badge').textContent == 'stopped'`)

	tab = uiPage(t, b, s, "/sessions/"+kid.ID)
	tab.WaitFor("the link to the parent", fmt.Sprintf(`[...document.querySelectorAll('a')].some(a => a.getAttribute('href') == '/sessions/%s')`, parent))
	noPageErrors(t, tab)
}
