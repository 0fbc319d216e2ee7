package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// These tests drive the web UI (CONTRACT §8) in headless Chromium against
// a real `berth serve` with the demo agent. With BERTH_UI_SCREENSHOTS=DIR
// they also save the screenshots shown in the README.

// uiPage opens path of s in a new tab of b.
func uiPage(t *testing.T, b *browsertest.Browser, s *server, path string) *browsertest.Tab {
	t.Helper()
	tab := b.Tab(t)
	tab.Run(chromedp.Navigate("http://" + s.addr + path))
	return tab
}

// shot saves a screenshot named name when BERTH_UI_SCREENSHOTS is set.
func shot(t *testing.T, tab *browsertest.Tab, name string) {
	t.Helper()
	dir := os.Getenv("BERTH_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	if strings.HasPrefix(name, "phone-") {
		tab.ScreenshotViewport(filepath.Join(dir, name+".png"))
		return
	}
	tab.Screenshot(filepath.Join(dir, name+".png"))
}

// createSession creates a demo session through the API.
func createSession(t *testing.T, s *server, body map[string]any) string {
	t.Helper()
	body["agent"] = "demo"
	if _, ok := body["sandbox"]; !ok {
		body["sandbox"] = "host"
	}
	var out struct {
		ID string `json:"id"`
	}
	if st, err := s.api("POST", "/v1/sessions", body, &out); st != 201 || err != nil {
		t.Fatalf("create: %d %v", st, err)
	}
	return out.ID
}

// transcriptHas is the JS condition "the transcript shows text".
func transcriptHas(text string) string {
	return fmt.Sprintf(`(document.querySelector('.transcript')||{innerText:''}).innerText.includes(%q)`, text)
}

// agentSaid is the JS condition "an agent message block shows text".
func agentSaid(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('.ev.agent-message .md')].some(e => e.innerText.includes(%q))`, text)
}

// noPageErrors fails t when the page threw or logged an error (a CSP
// violation is logged as one).
func noPageErrors(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	if errs := tab.Errors(); len(errs) > 0 {
		t.Fatalf("page errors: %v", errs)
	}
}

func TestUICreateSessionFromTheFormAndPrompt(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	tab := uiPage(t, b, s, "/")
	tab.WaitFor("the agents in the form", `document.querySelector('#ns-agent option[value=demo]')`)
	tab.Run(browsertest.Click(browsertest.Button("New session")))
	tab.Run(
		browsertest.Select(browsertest.Field("Agent"), "demo"),
		browsertest.Select(browsertest.Field("Sandbox"), "host"),
		browsertest.Type(browsertest.Field("Name"), "from-the-form"),
		browsertest.Type(browsertest.Field("First prompt"), "echo hello from the form"),
	)
	shot(t, tab, "new-session")
	tab.Run(browsertest.Click(browsertest.Button("Create")))
	tab.WaitFor("the session's page", `location.pathname.startsWith('/sessions/ses_')`)
	tab.WaitFor("the first answer", agentSaid("hello from the form"))

	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "echo the **second** answer"),
		browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the streamed answer", `[...document.querySelectorAll('.ev.agent-message strong')].some(e => e.textContent == 'second')`)
	tab.WaitFor("the idle badge", `document.querySelector('.session-head .badge').textContent == 'idle'`)
	shot(t, tab, "session")

	// Reloading the page's own address shows the same transcript.
	tab.Run(chromedp.Reload())
	tab.WaitFor("the transcript after a reload", agentSaid("hello from the form")+" && "+agentSaid("second"))

	list := uiPage(t, b, s, "/")
	list.WaitFor("the session in the list", `[...document.querySelectorAll('table.sessions a')].some(a => a.textContent == 'from-the-form')`)
	noPageErrors(t, tab)
	noPageErrors(t, list)
}

func TestUIApprovesAPermissionFromItsCard(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"permission_mode": "ask", "prompt": "ask may I edit the file?"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the permission card", `document.querySelector('.perm-card button.perm-option:not([disabled])')`)

	var perms struct {
		Permissions []struct {
			ID      string `json:"id"`
			Options []struct{ ID, Name, Kind string }
		} `json:"permissions"`
	}
	if _, err := s.api("GET", "/v1/sessions/"+id+"/permissions?state=pending", nil, &perms); err != nil || len(perms.Permissions) != 1 {
		t.Fatalf("pending permissions: %v %+v", err, perms)
	}
	var allow string
	for _, o := range perms.Permissions[0].Options {
		// The card's buttons carry the agent's own option names.
		tab.WaitFor("the option "+o.Name, fmt.Sprintf(`document.evaluate(%q, document, null, 9, null).singleNodeValue`, browsertest.Button(o.Name)))
		if o.Kind == "allow_once" {
			allow = o.Name
		}
	}
	if allow == "" {
		t.Fatalf("no allow_once option in %+v", perms.Permissions[0].Options)
	}
	tab.WaitFor("the waiting badge", `document.querySelector('.session-head .badge').textContent == 'waiting'`)
	shot(t, tab, "permission")
	tab.Run(browsertest.Click(browsertest.Button(allow)))
	tab.WaitFor("the card decided", `document.querySelector('.perm-card.decided')`)
	tab.WaitFor("the turn's end", transcriptHas("Turn ended: end_turn"))
	var after struct {
		Permissions []struct{ State, DecidedBy string } `json:"permissions"`
	}
	s.api("GET", "/v1/sessions/"+id+"/permissions", nil, &after)
	if len(after.Permissions) != 1 || after.Permissions[0].State != "decided" {
		t.Fatalf("permission after the click: %+v", after)
	}
	noPageErrors(t, tab)
}

func TestUICancelQueueSteerAndInterrupt(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the page", `document.querySelector('.transcript').dataset.lastSeq`)
	send := func(text, button string) {
		tab.Run(browsertest.Type(browsertest.Field("Prompt"), text), browsertest.Click(browsertest.Button(button)))
	}
	send("sleep 20000", "Send")
	tab.WaitFor("the running badge", `document.querySelector('.session-head .badge').textContent == 'running'`)
	send("echo queued one", "Send")
	send("echo queued two", "Send")
	tab.WaitFor("two queue entries", `document.querySelectorAll('.queue li[data-entry]').length == 2`)
	// Drop the second entry.
	tab.Run(browsertest.Click(`//li[@data-entry][contains(., "queued two")]//button[normalize-space(.)="Drop"]`))
	tab.WaitFor("one queue entry", `document.querySelectorAll('.queue li[data-entry]').length == 1`)
	send("echo steered in", "Steer")
	tab.WaitFor("the steer staged", `document.querySelector('.prompt-box [role=status]').textContent.startsWith('Staged')`)
	shot(t, tab, "busy")
	tab.Run(browsertest.Click(browsertest.Button("Cancel turn")))
	tab.WaitFor("the cancelled turn", transcriptHas("Turn ended: cancelled"))
	tab.WaitFor("the queued prompt's answer", agentSaid("queued one"))
	tab.WaitFor("the steered prompt's answer", agentSaid("steered in"))

	send("sleep 20000", "Send")
	tab.WaitFor("the running badge", `document.querySelector('.session-head .badge').textContent == 'running'`)
	send("echo after the interrupt", "Interrupt")
	tab.WaitFor("the interrupting prompt's answer", agentSaid("after the interrupt"))

	var events struct {
		Events []struct {
			Type string
			Data map[string]any
		} `json:"events"`
	}
	s.api("GET", "/v1/sessions/"+id+"/events?limit=1000", nil, &events)
	cancelled := 0
	for _, e := range events.Events {
		if e.Type == "agent_message" && strings.Contains(fmt.Sprint(e.Data["text"]), "queued two") {
			t.Fatalf("the dropped entry ran")
		}
		if e.Type == "turn_ended" && e.Data["stop_reason"] == "cancelled" {
			cancelled++
		}
	}
	if cancelled != 2 {
		t.Fatalf("%d cancelled turns, want 2 (Cancel turn, Interrupt)", cancelled)
	}
	noPageErrors(t, tab)
}

func TestUIStopAndResume(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"prompt": "echo before the stop"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the answer", agentSaid("before the stop"))
	tab.Run(browsertest.Click(browsertest.Button("Stop")))
	tab.WaitFor("the stopped badge", `document.querySelector('.session-head .badge').textContent == 'stopped'`)
	tab.WaitFor("Resume enabled", `!document.evaluate(`+"`"+browsertest.Button("Resume")+"`"+`, document, null, 9, null).singleNodeValue.disabled`)
	tab.Run(browsertest.Click(browsertest.Button("Resume")))
	tab.WaitFor("the idle badge", `document.querySelector('.session-head .badge').textContent == 'idle'`)
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "echo after the resume"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the answer after the resume", agentSaid("after the resume"))
	noPageErrors(t, tab)
}

func TestUIAgentTextNeverRuns(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	prompt := strings.Join([]string{
		`echo <img src=x onerror="window.__xss=1">`,
		`echo <script>window.__xss=2</script>`,
		`echo [click me](javascript:window.__xss=3) and <a href="javascript:window.__xss=4">raw</a>`,
		`echo [safe link](https://example.com/docs) done`,
		`think <img src=y onerror="window.__xss=5">`,
	}, "\n")
	id := createSession(t, s, map[string]any{"prompt": prompt})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the answer", agentSaid("done"))
	// Open every fold and raw view, and click the would-be links.
	tab.Run(chromedp.Evaluate(`document.querySelectorAll('details').forEach(d => d.open = true);
		document.querySelectorAll('.raw-toggle').forEach(b => b.click()); true`, nil))
	for _, text := range []string{`<img src=x onerror="window.__xss=1">`, `<script>window.__xss=2</script>`, `[click me](javascript:window.__xss=3)`} {
		tab.WaitFor("the text "+text, agentSaid(text))
	}
	var got struct {
		XSS    any  `json:"xss"`
		Imgs   int  `json:"imgs"`
		Script int  `json:"scripts"`
		JSLink int  `json:"jsLinks"`
		Safe   bool `json:"safe"`
	}
	tab.Eval(`({xss: window.__xss ?? null,
		imgs: document.querySelectorAll('main img').length,
		scripts: document.querySelectorAll('main script').length,
		jsLinks: [...document.querySelectorAll('main a')].filter(a => !/^https?:/.test(a.href)).length,
		safe: [...document.querySelectorAll('.md a')].some(a => a.href == 'https://example.com/docs' && a.rel == 'noopener noreferrer')})`, &got)
	if got.XSS != nil || got.Imgs != 0 || got.Script != 0 || got.JSLink != 0 || !got.Safe {
		t.Fatalf("agent text became markup: %+v", got)
	}
	noPageErrors(t, tab)
}

func TestUIFollowsAcrossADaemonRestart(t *testing.T) {
	b := browsertest.New(t)
	home := t.TempDir()
	s := startServer(t, home)
	id := createSession(t, s, map[string]any{"prompt": "echo one"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the first answer", agentSaid("one"))
	s.stop()
	tab.WaitFor("the page noticing", `document.querySelector('.live').textContent.includes('reconnecting')`)
	s2 := startServerAt(t, home, s.addr)
	if st, err := s2.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": "echo two"}, nil); st != 200 || err != nil {
		t.Fatalf("prompt after the restart: %d %v", st, err)
	}
	tab.WaitFor("the answer after the restart", agentSaid("two"))
	var sess struct {
		LastSeq int64 `json:"last_seq"`
	}
	s2.api("GET", "/v1/sessions/"+id, nil, &sess)
	tab.WaitFor("every event once", fmt.Sprintf(`document.querySelector('.transcript').dataset.lastSeq == '%d' && document.querySelector('.transcript').dataset.count == '%d'`, sess.LastSeq, sess.LastSeq))
	var twos int
	tab.Eval(`[...document.querySelectorAll('.ev.prompt .user-text')].filter(e => e.textContent == 'echo two').length`, &twos)
	if twos != 1 {
		t.Fatalf("the prompt after the restart shows %d times", twos)
	}
}

// startServerAt is startServer on a given address (a restart).
func startServerAt(t *testing.T, home, addr string) *server {
	t.Helper()
	return startServerAddr(t, home, addr, nil)
}

func TestUISessionsListPagesFiltersAndFollows(t *testing.T) {
	b := browsertest.New(t)
	home := t.TempDir()
	// An agent that fails its handshake makes a stopped session cheaply.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[[agents]]\nname = \"broken\"\ncommand = \"/bin/false\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	for i := range 52 {
		body := map[string]any{"agent": "broken", "sandbox": "host", "name": fmt.Sprintf("old-%02d", i)}
		if st, err := s.api("POST", "/v1/sessions", body, nil); st != 201 || err != nil {
			t.Fatalf("create %d: %d %v", i, st, err)
		}
	}
	tab := uiPage(t, b, s, "/")
	rows := `document.querySelectorAll('table.sessions tbody tr[data-id]').length`
	tab.WaitFor("the first page", rows+" == 50")
	shot(t, tab, "sessions")
	tab.Run(browsertest.Click(browsertest.Button("Next page")))
	tab.WaitFor("the second page", rows+" == 2")
	tab.Run(browsertest.Click(browsertest.Button("Previous page")))
	tab.WaitFor("the first page again", rows+" == 50")

	// A label filter, kept in the address; then a session that matches it
	// appears without a reload, and its badge follows its turn.
	tab.Run(browsertest.Type(browsertest.Field("Filter by label"), "team=web\n"))
	tab.WaitFor("the filter applied", rows+" == 0 && location.search == '?label=team%3Dweb'")
	id := createSession(t, s, map[string]any{"name": "live-one", "labels": map[string]string{"team": "web"}})
	row := fmt.Sprintf(`document.querySelector('tr[data-id=%q]')`, id)
	tab.WaitFor("the new session's row", row)
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts", map[string]any{"text": "sleep 3000"}, nil); st != 202 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	tab.WaitFor("the running badge", row+`.querySelector('.badge').textContent == 'running'`)
	tab.WaitFor("the idle badge", row+`.querySelector('.badge').textContent == 'idle'`)

	tab.Run(browsertest.Type(browsertest.Field("Filter by label"), "\n"), browsertest.Select(browsertest.Field("Filter by state"), "active"))
	tab.WaitFor("only the active session", rows+" == 1 && "+row)
	tab.Run(browsertest.Select(browsertest.Field("Filter by state"), "stopped"), browsertest.Select(browsertest.Field("Filter by agent"), "broken"))
	tab.WaitFor("the stopped page", rows+" == 50 && !"+row)

	// A phone's width: the rows become cards, nothing overflows sideways.
	tab.Run(chromedp.EmulateViewport(390, 844), chromedp.Navigate("http://"+s.addr+"/"))
	tab.WaitFor("the list at a phone's width", rows+" == 50")
	shot(t, tab, "phone-sessions")
	if wide := tooWide(tab); wide != "" {
		t.Fatalf("the list is wider than a phone's screen: %s", wide)
	}
	tab.Run(chromedp.Navigate("http://" + s.addr + "/sessions/" + id))
	tab.WaitFor("the session at a phone's width", transcriptHas("Turn ended"))
	shot(t, tab, "phone-session")
	if wide := tooWide(tab); wide != "" {
		t.Fatalf("the session page is wider than a phone's screen: %s", wide)
	}
	noPageErrors(t, tab)
}

// tooWide names the elements that reach past the window's right edge
// ("" when the page fits its width).
func tooWide(tab *browsertest.Tab) string {
	var out string
	tab.Eval(`document.documentElement.scrollWidth <= window.innerWidth + 1 ? '' :
		[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
			.slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`, &out)
	return out
}
