package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

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

// A list answer that left the daemon before a live change arrives after
// it: the list lays the change over the answer instead of drawing the
// older state back (CI saw a stopped child shown active for good).
func TestUISlowListAnswerKeepsLiveChanges(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"name": "changes-while-listing"})
	tab := b.Tab(t)
	signIn(t, tab, s)
	// Once window.__hold is set, a list request goes out at once (its
	// answer is the daemon's state then) but reaches the page only when
	// the test lets it.
	tab.Run(chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`(() => {
  const real = window.fetch.bind(window);
  window.__held = [];
  window.fetch = (url, init) => {
    const p = real(url, init);
    if (!window.__hold || !String(url).includes('/v1/sessions?')) return p;
    return new Promise((resolve, reject) => window.__held.push(() => p.then(resolve, reject)));
  };
})();`).Do(ctx)
		return err
	}))
	tab.Run(chromedp.Navigate("http://" + s.addr + "/"))
	row := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, id)
	tab.WaitFor("the session's row", row)
	tab.Eval(`window.__hold = true`, nil)
	tab.Run(chromedp.SetValue(`#f-agent`, "demo", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#f-agent').dispatchEvent(new Event('change')), true`, nil))
	tab.WaitFor("the list request held", `window.__held.length > 0`)
	if st, err := s.api("POST", "/v1/sessions/"+id+"/stop", nil, nil); st != 200 || err != nil {
		t.Fatalf("stop: %d %v", st, err)
	}
	tab.WaitFor("the stop, live", row+`.querySelector('.badge').textContent == 'stopped'`)
	tab.Eval(`window.__hold = false; window.__held.splice(0).forEach((f) => f()); true`, nil)
	// Two frames after the held answer is in, the list has been drawn.
	tab.Run(chromedp.Evaluate(`new Promise((r) => setTimeout(() => requestAnimationFrame(() => requestAnimationFrame(() => r(true))), 200))`, nil,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	var badge string
	tab.Eval(row+`.querySelector('.badge').textContent`, &badge)
	if badge != "stopped" {
		t.Fatalf("after the older list answer the row says %q, want stopped", badge)
	}
	noPageErrors(t, tab)
}
