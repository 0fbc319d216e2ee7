package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// These tests drive the web UI (docs/api.md, "Web UI") in headless Chromium
// against a real `berth serve` with the demo agent. With
// BERTH_UI_SCREENSHOTS=DIR they also save the screenshots shown in the README.

// uiPage opens path of s in a new tab of b, signed in with the daemon's
// token through the sign-in form.
func uiPage(t *testing.T, b *browsertest.Browser, s *server, path string) *browsertest.Tab {
	t.Helper()
	tab := b.Tab(t)
	signIn(t, tab, s)
	tab.Run(chromedp.Navigate("http://" + s.addr + path))
	return tab
}

// signIn types the daemon's token into the sign-in form and waits for the
// sessions list.
func signIn(t testing.TB, tab *browsertest.Tab, s *server) {
	t.Helper()
	token := readTokenFile(s.home)
	if token == "" {
		t.Fatalf("the daemon wrote no token in %s", s.home)
	}
	tab.Run(chromedp.Navigate("http://" + s.addr + "/login"))
	tab.Run(browsertest.Type(browsertest.Field("Token"), token), browsertest.Click(browsertest.Button("Sign in")))
	tab.WaitFor("the sessions list after signing in", `location.pathname == '/' && document.querySelector('table.sessions')`)
}

// shot saves a screenshot named name when BERTH_UI_SCREENSHOTS is set: what
// a 1280×800 window shows (a phone- one: what the phone's viewport the test
// set shows), as a reader sees it, not the whole page.
func shot(t *testing.T, tab *browsertest.Tab, name string) {
	t.Helper()
	dir := os.Getenv("BERTH_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !strings.HasPrefix(name, "phone-") {
		tab.Run(chromedp.EmulateViewport(1280, 800))
	}
	tab.ScreenshotViewport(filepath.Join(dir, name+".png"))
}

// createSession creates a demo session through the API.
func createSession(t *testing.T, s *server, body map[string]any) string {
	t.Helper()
	return s.create(t, body).ID
}

// serverOfStopped starts a daemon holding n stopped sessions, named by
// the format name of their index: their agent, "broken", fails its
// handshake, which makes a stopped session cheaply.
func serverOfStopped(tb testing.TB, n int, name string) *server {
	tb.Helper()
	home := tb.TempDir()
	writeConfig(tb, home, "[[agents]]\nname = \"broken\"\ncommand = \"/bin/false\"\n")
	s := startServer(tb, home)
	for i := range n {
		s.create(tb, map[string]any{"agent": "broken", "name": fmt.Sprintf(name, i)})
	}
	return s
}

// newSessionForm opens the sessions list of s in a new tab of b with the
// New session form open, the demo agent and the host sandbox picked.
func newSessionForm(t *testing.T, b *browsertest.Browser, s *server) *browsertest.Tab {
	t.Helper()
	tab := uiPage(t, b, s, "/")
	tab.WaitFor("the agents in the form", `document.querySelector('#ns-agent option[value=demo]')`)
	tab.Run(browsertest.Click(browsertest.Button("New session")))
	tab.Run(
		browsertest.Select(browsertest.Field("Agent"), "demo"),
		browsertest.Select(browsertest.Field("Sandbox"), "host"),
	)
	return tab
}

// transcriptHas is the JS condition "the transcript shows text" (as it
// reads, without the details).
func transcriptHas(text string) string {
	return fmt.Sprintf(`(document.querySelector('.transcript')||{innerText:''}).innerText.includes(%q)`, text)
}

// logHas is the JS condition "the transcript holds an entry of the event
// type typ", shown or among the details (see Show details).
func logHas(typ string) string {
	return fmt.Sprintf(`!!document.querySelector(%q)`, fmt.Sprintf(`.transcript .ev[data-type=%s]`, typ))
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
	tab := newSessionForm(t, b, s)
	tab.Run(
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
	tab.WaitFor("the turn's end", logHas("turn_ended"))
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
		tab.WaitFor("the prompt accepted", `document.getElementById('prompt').value == ''`)
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

// A page signed in with the token follows its session across a daemon
// restart without asking for the token again: the sign-in outlives the
// daemon.
func TestUIFollowsAcrossADaemonRestart(t *testing.T) {
	b := browsertest.New(t)
	home := t.TempDir()
	s := startServer(t, home)
	id := createSession(t, s, map[string]any{"prompt": "echo one"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the first answer", agentSaid("one"))
	s.stop()
	tab.WaitFor("the page noticing", `document.querySelector('.live').textContent.includes('reconnecting')`)
	s2 := startServerAddr(t, home, s.addr, nil)
	if st, err := s2.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": "echo two"}, nil); st != 200 || err != nil {
		t.Fatalf("prompt after the restart: %d %v", st, err)
	}
	tab.WaitFor("the answer after the restart", agentSaid("two"))
	var sess struct {
		LastSeq int64 `json:"last_seq"`
	}
	s2.api("GET", "/v1/sessions/"+id, nil, &sess)
	tab.WaitFor("every event once", everyEventOnce(sess.LastSeq))
	var twos int
	tab.Eval(`[...document.querySelectorAll('.ev.prompt .user-text')].filter(e => e.textContent == 'echo two').length`, &twos)
	if twos != 1 {
		t.Fatalf("the prompt after the restart shows %d times", twos)
	}
	var asked bool
	tab.Eval(`!!document.getElementById('token')`, &asked)
	if asked {
		t.Fatal("the page asks for the token after the restart")
	}
}

func TestUISessionsListPagesFiltersAndFollows(t *testing.T) {
	b := browsertest.New(t)
	s := serverOfStopped(t, 52, "old-%02d")
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
	tab.WaitFor("the session at a phone's width", logHas("turn_ended"))
	// The screenshot shows the page's top: the header, then the conversation.
	tab.Eval(`window.scrollTo(0, 0), true`, nil)
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

func TestUISignIn(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	tab := b.Tab(t)
	// Without a sign-in the list's first API call answers 401: the
	// sign-in screen replaces it.
	tab.Run(chromedp.Navigate("http://" + s.addr + "/"))
	tab.WaitFor("the sign-in form", `document.getElementById('token')`)
	// The top bar's links need a sign-in: the sign-in page has none.
	var nav []string
	tab.Eval(`[...document.querySelectorAll('header.top nav a, header.top nav button')].filter(e => e.getClientRects().length > 0).map(e => e.textContent)`, &nav)
	if len(nav) > 0 {
		t.Fatalf("the sign-in page shows %q", nav)
	}
	shot(t, tab, "sign-in")
	tab.Run(browsertest.Type(browsertest.Field("Token"), "not-the-token"), browsertest.Click(browsertest.Button("Sign in")))
	tab.WaitFor("the refusal", `document.querySelector('.signin [role=alert]').textContent.includes('did not work')`)
	tab.Run(browsertest.Type(browsertest.Field("Token"), readTokenFile(s.home)), browsertest.Click(browsertest.Button("Sign in")))
	tab.WaitFor("the sessions list", `document.querySelector('table.sessions')`)
	tab.WaitFor("Sign out once signed in", `document.evaluate(`+"`"+browsertest.Button("Sign out")+"`"+`, document, null, 9, null).singleNodeValue.getClientRects().length > 0`)
	var stored bool
	tab.Eval(`localStorage.length + sessionStorage.length > 0 || document.cookie.includes('berth_session')`, &stored)
	if stored {
		t.Fatalf("the page can read a sign-in secret (web storage or a non-HttpOnly cookie)")
	}
	// Sign out ends the sign-in on the daemon: the page asks again.
	tab.Run(browsertest.Click(browsertest.Button("Sign out")))
	tab.WaitFor("the sign-in form after signing out", `document.getElementById('token')`)
	var status int
	tab.Run(chromedp.Evaluate(`fetch('/v1/health').then((r) => r.status)`, &status,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != 401 {
		t.Fatalf("after Sign out the API answers %d, want 401", status)
	}
	tab.Run(browsertest.Type(browsertest.Field("Token"), readTokenFile(s.home)), browsertest.Click(browsertest.Button("Sign in")))
	tab.WaitFor("the sessions list again", `document.querySelector('table.sessions')`)

	// A one-time address signs a fresh browser in and leaves no code in
	// the address bar or its history.
	var code struct {
		URL string `json:"url"`
	}
	if st, err := s.api("POST", "/v1/login/codes", map[string]any{}, &code); st != 201 || err != nil {
		t.Fatalf("login code: %d %v", st, err)
	}
	b2 := browsertest.New(t)
	tab2 := b2.Tab(t)
	tab2.Run(chromedp.Navigate(strings.Replace(code.URL, "127.0.0.1:", "127.0.0.1:", 1)))
	tab2.WaitFor("the list after the one-time address", `location.pathname == '/' && document.querySelector('table.sessions')`)
	var hist string
	tab2.Eval(`location.href`, &hist)
	if strings.Contains(hist, "code=") {
		t.Fatalf("the code stayed in the address: %s", hist)
	}
	// The code works once.
	tab3 := browsertest.New(t).Tab(t)
	tab3.Run(chromedp.Navigate(code.URL))
	tab3.WaitFor("the refusal of a used code", `document.querySelector('.signin [role=alert]') && document.querySelector('.signin [role=alert]').textContent != ''`)
	noPageErrors(t, tab2)
}

// A daemon restarted with a new token ends the sign-ins made with the old
// one: the page asks for the token, then comes back to the session.
func TestUISignInAgainAfterANewToken(t *testing.T) {
	b := browsertest.New(t)
	home := t.TempDir()
	s := startServer(t, home)
	id := createSession(t, s, map[string]any{"prompt": "echo before"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the answer", agentSaid("before"))
	s.stop()
	// The daemon takes the token it finds in its home.
	const token = "a-new-token-for-the-restarted-daemon"
	if err := os.WriteFile(filepath.Join(home, bclient.TokenFile), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startServerAddr(t, home, s.addr, nil)
	tab.WaitFor("the sign-in form", `document.getElementById('token')`)
	tab.Run(browsertest.Type(browsertest.Field("Token"), token), browsertest.Click(browsertest.Button("Sign in")))
	tab.WaitFor("the session again", `location.pathname == '/sessions/`+id+`'`)
	tab.WaitFor("its transcript", agentSaid("before"))
}

func TestUIAnotherOriginCannotDriveTheDaemon(t *testing.T) {
	t.Run("signed in", func(t *testing.T) {
		b := browsertest.New(t)
		s := startServer(t, t.TempDir())
		// The victim's browser is signed in to the daemon.
		uiPage(t, b, s, "/")
		attackFromAnotherOrigin(t, b, s)
	})
	t.Run("no token needed", func(t *testing.T) {
		// Only the browser guards (Origin, Sec-Fetch-Site, JSON bodies)
		// stand between the page and the daemon.
		s := startServerEnv(t, t.TempDir(), []string{"BERTH_SERVER_LOOPBACK_WITHOUT_TOKEN=true"})
		attackFromAnotherOrigin(t, browsertest.New(t), s)
	})
}

// attackFromAnotherOrigin opens, in b, a page on another origin that tries
// no-cors POSTs, a form post and fetches to create a session on s, and
// fails t if the number of sessions moves.
func attackFromAnotherOrigin(t *testing.T, b *browsertest.Browser, s *server) {
	count := func() int {
		var page struct {
			Sessions []struct{ ID string } `json:"sessions"`
		}
		if st, err := s.api("GET", "/v1/sessions", nil, &page); st != 200 || err != nil {
			t.Fatalf("list: %d %v", st, err)
		}
		return len(page.Sessions)
	}
	before := count()

	// A page on another origin tries everything a page can send.
	target := "http://" + s.addr
	attack := `<!doctype html><title>attack</title><body>
<form id=f method=POST action="` + target + `/v1/sessions" enctype="text/plain" target=sink>
<input name='{"agent":"demo","sandbox":"host","prompt":"echo pwned","x":"' value='"}'></form>
<iframe name=sink></iframe>
<script>
const body = JSON.stringify({agent: "demo", sandbox: "host", prompt: "echo pwned"});
const tries = [
  fetch("` + target + `/v1/sessions", {method: "POST", mode: "no-cors", credentials: "include", body}),
  fetch("` + target + `/v1/sessions", {method: "POST", mode: "no-cors", credentials: "include", body, headers: {"Content-Type": "text/plain"}}),
  fetch("` + target + `/v1/sessions", {method: "POST", credentials: "include", body, headers: {"Content-Type": "application/json"}}),
  fetch("` + target + `/v1/sessions", {credentials: "include"}).then(r => r.text()),
];
document.getElementById("f").submit();
Promise.allSettled(tries).then(r => { window.done = r.map(x => x.status + ": " + String(x.reason || x.value).slice(0, 60)); });
</script>`
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, attack)
	}))
	defer evil.Close()
	// Another origin: another host name for the loopback address.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	page := b.Tab(t)
	page.Run(chromedp.Navigate(evilURL))
	page.WaitFor("every attempt to settle", `window.done`)
	// The form post went out too: give the daemon its answer's time by
	// waiting for the iframe to load something.
	page.WaitFor("the form post's answer", `(() => { try { return frames.sink.location.href; } catch (e) { return true; } })()`)
	var done []string
	page.Eval(`window.done`, &done)
	if after := count(); after != before {
		t.Fatalf("another origin created sessions: %d → %d (%v)", before, after, done)
	}
	t.Logf("the attempts: %v", done)
}

func TestUIExecSnapshotAndDelete(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"prompt": "write notes.txt kept"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the write's diff", `document.querySelector('pre.diff .add')`)
	tab.Run(browsertest.Type(browsertest.Field("Command"), "cat notes.txt; echo; echo to-stderr >&2"), browsertest.Click(browsertest.Button("Run")))
	tab.WaitFor("the command's output", `document.querySelector('.exec + pre.terminal, pre.terminal[aria-label="Exec output"]').textContent.includes('kept\nto-stderr\n[exit 0')`)
	tab.Run(browsertest.Click(browsertest.Button("Snapshot")))
	tab.WaitFor("the snapshot", `document.querySelector('.notice').textContent.startsWith('Snapshot snap_')`)
	var snaps struct {
		Snapshots []struct{ ID string } `json:"snapshots"`
	}
	if s.api("GET", "/v1/sessions/"+id+"/snapshots", nil, &snaps); len(snaps.Snapshots) != 1 {
		t.Fatalf("snapshots: %+v", snaps)
	}
	tab.Run(browsertest.Click(browsertest.Button("Delete")), browsertest.Click(browsertest.Button("Delete for good")))
	tab.WaitFor("the list", `location.pathname == '/' && document.querySelector('table.sessions')`)
	if st, _ := s.api("GET", "/v1/sessions/"+id, nil, nil); st != 404 {
		t.Fatalf("the deleted session answers %d", st)
	}
	noPageErrors(t, tab)
}

func TestUILongTranscriptShowsItsEndThenEarlierEntries(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	var lines []string
	for i := range 1200 {
		lines = append(lines, fmt.Sprintf("echo line %d", i), fmt.Sprintf("think thought %d", i))
	}
	id := createSession(t, s, map[string]any{})
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": strings.Join(lines, "\n")}, nil); st != 200 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	var sess struct {
		LastSeq int64 `json:"last_seq"`
	}
	s.api("GET", "/v1/sessions/"+id, nil, &sess)
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("every event", everyEventOnce(sess.LastSeq))
	entries := `document.querySelectorAll('.transcript .entries > .ev').length`
	tab.WaitFor("the newest entries only", entries+` == 400 && `+agentSaid("line 1199"))
	for range 20 {
		var hidden bool
		if tab.Eval(`document.querySelector('.transcript .earlier').hidden`, &hidden); hidden {
			break
		}
		tab.Run(browsertest.Click(`//button[starts-with(normalize-space(.), "Show earlier events")]`))
	}
	tab.WaitFor("the whole log", logHas("session_created")+` && `+agentSaid("line 0")+` && document.querySelector('.transcript .earlier').hidden`)
	var seqs []int
	tab.Eval(`[...document.querySelectorAll('.transcript .entries > .ev')].map(e => +e.dataset.seq)`, &seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("entries out of order at %d: %d after %d", i, seqs[i], seqs[i-1])
		}
	}
	noPageErrors(t, tab)
}

// TestUIReplaysPagesCutByBytes: a page of events ends once its data reach
// the server's bound in bytes, well before 1,000 events after a flood of
// large chunks; the page replays every event anyway, each once, in order
// (it used to fetch the next page from seq 1000 and skip what lay
// between).
func TestUIReplaysPagesCutByBytes(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	lines := []string{"flood 12 1000000"}
	for i := range 1100 {
		lines = append(lines, fmt.Sprintf("echo line %d", i))
	}
	id := createSession(t, s, map[string]any{})
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": strings.Join(lines, "\n")}, nil); st != 200 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	var page struct {
		Events []berth.Event `json:"events"`
	}
	if st, err := s.api("GET", "/v1/sessions/"+id+"/events?limit=1000", nil, &page); st != 200 || len(page.Events) >= 1000 {
		t.Fatalf("the first page holds %d events (%d %v): the bytes bound did not cut it", len(page.Events), st, err)
	}
	var sess struct {
		LastSeq int64 `json:"last_seq"`
	}
	s.api("GET", "/v1/sessions/"+id, nil, &sess)
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("every event, each once", everyEventOnce(sess.LastSeq))
	tab.WaitFor("the end of the turn", agentSaid("line 1099"))
	noPageErrors(t, tab)
}

// everyEventOnce is the JS condition "the transcript shows every event up
// to at least seq, each once": as many events as the last seq.
func everyEventOnce(seq int64) string {
	return fmt.Sprintf(`(t => t && +t.dataset.lastSeq >= %d && t.dataset.count == t.dataset.lastSeq)(document.querySelector('.transcript'))`, seq)
}

// TestUITranscriptDropsEventsItHasShown feeds the transcript module
// overlapping batches, as a replay page and a reconnected stream can be
// (a stream reopened from a seq while a batch was still waiting to be
// drawn): each event shows once, and a batch with a hole is shown as one.
func TestUITranscriptDropsEventsItHasShown(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	tab := uiPage(t, b, s, "/")
	var got struct {
		Count, LastSeq, Messages int
		Text                     string
	}
	tab.Run(chromedp.Evaluate(`(async () => {
		const { Transcript } = await import('/ui/js/transcript.js');
		const el = document.createElement('section');
		document.body.append(el);
		const tr = new Transcript(el, {});
		const ev = (seq, text) => ({ seq, session_id: 's', turn_id: 't' + seq, type: 'agent_message', time: new Date().toISOString(), data: { text } });
		tr.add([1, 2, 3, 4, 5].map((n) => ev(n, 'message ' + n)));
		tr.add([3, 4, 5, 6, 7, 8].map((n) => ev(n, 'message ' + n)));
		tr.add([8, 9].map((n) => ev(n, 'message ' + n)));
		return { count: +el.dataset.count, lastSeq: +el.dataset.lastSeq,
			messages: el.querySelectorAll('.ev.agent-message').length, text: el.innerText };
	})()`, &got, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if got.Count != 9 || got.LastSeq != 9 || got.Messages != 9 || strings.Count(got.Text, "message 4") != 1 {
		t.Fatalf("overlapping batches: %+v", got)
	}
}

// TestUIAgentWordsCannotAddClasses feeds a permission and a tool call whose
// kind and status carry the page's own class names: the controls get
// neither (an agent could otherwise dress a reject as the primary button).
func TestUIAgentWordsCannotAddClasses(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	tab := uiPage(t, b, s, "/")
	var got struct{ Classes []string }
	tab.Run(chromedp.Evaluate(`(async () => {
		const { Transcript } = await import('/ui/js/transcript.js');
		const el = document.createElement('section');
		document.body.append(el);
		const tr = new Transcript(el, {});
		const t = new Date().toISOString();
		tr.add([
			{ seq: 1, session_id: 's', turn_id: 't', type: 'tool_call', time: t,
			  data: { tool_call_id: 'c1', title: 'x', kind: 'edit', status: 'pending primary danger' } },
			{ seq: 2, session_id: 's', turn_id: 't', type: 'permission_requested', time: t,
			  data: { permission: { id: 'perm_1', turn_id: 't', state: 'pending', tool_call: { title: 'x' },
			    options: [{ id: 'o1', name: 'Reject', kind: 'reject_once primary' }] } } },
		]);
		return { classes: [...el.querySelectorAll('*')].map((n) => n.className).filter(Boolean) };
	})()`, &got, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if len(got.Classes) == 0 {
		t.Fatal("nothing was drawn")
	}
	for _, c := range got.Classes {
		for _, f := range strings.Fields(c) {
			if f == "primary" || f == "danger" {
				t.Errorf("an agent's word became the class %q (in %q)", f, c)
			}
		}
	}
}

// An event of a kind the page sees only live (a file request refused while
// the page follows the session) is shown as it happens, not after a
// reload: the page listens for every kind of the log.
func TestUIShowsARefusedFileLive(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the stream followed", `document.querySelector('.session-head .live').dataset.stream == 'open'`)
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": "read /etc/hostname"}, nil); st != 200 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	tab.WaitFor("the turn's end", logHas("turn_ended"))
	tab.WaitFor("file_refused in the transcript", `document.querySelector('.ev[data-type=file_refused]')`)
	noPageErrors(t, tab)
}
