package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/berth-sh/berth/internal/modelstub"
	"github.com/chromedp/chromedp"
)

// These tests drive the web UI's credentials, spend and first-run parts
// (docs/api.md, "Web UI") against a daemon whose demo-model agent (the
// demo agent calling the Anthropic API: its `llm TEXT` prompt makes one
// model call) calls the model stub through the model gateway.

// modelServer starts a daemon whose catalog has demo-model, with the
// upstreams free (no credential, priced so that a call costs cents) and
// paid (credential paid-key), both the model stub; seen records the keys
// the stub was sent. env is the daemon's extra environment.
func modelServer(t *testing.T, env []string) (*server, *keyLog) {
	t.Helper()
	seen := &keyLog{}
	stub := httptest.NewServer(seen.wrap(&modelstub.Server{}))
	t.Cleanup(stub.Close)
	// Its sessions' gateway sockets live below the home.
	home := shortHome(t)
	writeConfig(t, home, fmt.Sprintf(`
[[agents]]
name = "demo-model"
command = "berth"
args = ["agent-demo"]
model_api = "anthropic"

[[models]]
name = "free"
kind = "anthropic"
url = %q
prices = { input = 300, output = 1500, cache_read = 30, cache_write = 375 }

[[models]]
name = "paid"
kind = "anthropic"
url = %q
credential = "paid-key"
`, stub.URL, stub.URL))
	return startServerEnv(t, home, env), seen
}

// removeButton is the XPath of the Remove button of credential name (its
// accessible name is "Remove NAME").
func removeButton(name string) string {
	return fmt.Sprintf(`//button[@aria-label=%q]`, "Remove "+name)
}

// A session whose agent lacks a credential names it in its header with a
// link to the Credentials screen, the name filled in; the value saved
// there is never in the page (not in the field once sent, not in the
// list) and is what the upstream receives at the session's next call;
// Remove takes it away.
func TestUICredentialNamedBySessionSetAndRemoved(t *testing.T) {
	b := browsertest.New(t)
	s, seen := modelServer(t, nil)
	sess := s.create(t, map[string]any{"agent": "demo-model", "models": map[string]string{"anthropic": "paid"}})
	if r := s.turn(t, sess.ID, "llm hello"); !strings.HasPrefix(r.Text, "llm: 401 ") {
		t.Fatalf("a call without its credential: %+v", r)
	}
	tab := uiPage(t, b, s, "/sessions/"+sess.ID)
	tab.WaitFor("the missing credential named", `(document.querySelector('.missing-credential')||{textContent:''}).textContent.includes('This agent needs the credential paid-key')`)
	tab.WaitFor("the needs_auth badge", `document.querySelector('.session-head .badge').textContent == 'needs_auth'`)
	shot(t, tab, "missing-credential")
	tab.Run(browsertest.Click(`//a[normalize-space(.)="Set paid-key"]`))
	tab.WaitFor("the Credentials screen with the name filled in", `location.pathname == '/credentials' && location.search == '?name=paid-key' && document.getElementById('cr-name') && document.getElementById('cr-name').value == 'paid-key'`)

	secret := "sk-ui-secret-0123456789abcdef"
	tab.Run(
		browsertest.Type(browsertest.Field("Value"), secret),
		browsertest.Select(browsertest.Field("Kind"), berth.CredentialAPIKey),
		browsertest.Click(browsertest.Button("Save credential")))
	tab.WaitFor("the credential listed", `[...document.querySelectorAll('tr[data-name]')].some(r => r.dataset.name == 'paid-key' && r.innerText.includes('api_key'))`)
	var attrs struct {
		Type, Autocomplete, Value string
	}
	tab.Eval(`(() => { const v = document.getElementById('cr-value'); return {type: v.type, autocomplete: v.autocomplete, value: v.value}; })()`, &attrs)
	if attrs.Type != "password" || attrs.Autocomplete != "off" || attrs.Value != "" {
		t.Fatalf("the Value field after Save: %+v, want an empty password field without autocomplete", attrs)
	}
	var html string
	tab.Eval(`document.documentElement.outerHTML`, &html)
	if strings.Contains(html, secret) || strings.Contains(html, secret[8:]) {
		t.Fatal("the credential's value is in the page")
	}
	shot(t, tab, "credentials")
	tab.Run(chromedp.EmulateViewport(390, 844))
	shot(t, tab, "phone-credentials")
	if wide := pageOverflow(tab); wide != "" {
		t.Fatalf("the Credentials screen is wider than a phone's screen: %s", wide)
	}
	tab.Run(chromedp.EmulateViewport(1280, 900))

	// The value typed is the one the upstream receives.
	before := len(seen.all())
	if r := s.turn(t, sess.ID, "llm again"); r.Text != "llm: 200 stub: again" {
		t.Fatalf("the call once the credential is set: %+v", r)
	}
	if keys := seen.all()[before:]; len(keys) != 1 || keys[0] != secret+"|" {
		t.Fatalf("the upstream saw keys %q, want the value typed", keys)
	}

	tab.Run(browsertest.Click(removeButton("paid-key")))
	tab.WaitFor("the credential gone from the list", `!document.querySelector('tr[data-name="paid-key"]') && document.querySelector('table.credentials').innerText.includes('No credentials set.')`)
	var list struct{ Credentials []berth.Credential }
	if st, err := s.api("GET", "/v1/credentials", nil, &list); st != 200 || err != nil || len(list.Credentials) != 0 {
		t.Fatalf("credentials after Remove: %d %v %+v", st, err, list)
	}
	noPageErrors(t, tab)
}

// pageOverflow says how much wider than the window the page is, "" when
// it is not.
func pageOverflow(tab *browsertest.Tab) string {
	var wide string
	tab.Eval(`document.documentElement.scrollWidth > window.innerWidth ? document.documentElement.scrollWidth + ' > ' + window.innerWidth : ''`, &wide)
	return wide
}

// The top bar's Credentials link opens the screen.
func TestUICredentialsFromTheTopBar(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	tab := uiPage(t, b, s, "/")
	tab.Run(browsertest.Click(`//nav[@id="topnav"]//a[normalize-space(.)="Credentials"]`))
	tab.WaitFor("the Credentials screen", `location.pathname == '/credentials' && document.querySelector('h1').textContent == 'Credentials' && document.querySelector('table.credentials').innerText.includes('No credentials set.')`)
	noPageErrors(t, tab)
}

// A session's spend — cost, tokens and what is left of its budget, or
// "over budget" — is in the sessions list's Spend column, updated live
// by the stream as its agent calls a model, and in its header, also live.
func TestUISpendInTheListAndTheHeader(t *testing.T) {
	b := browsertest.New(t)
	s, _ := modelServer(t, nil)
	budget := s.create(t, map[string]any{"agent": "demo-model", "name": "with-budget", "models": map[string]string{"anthropic": "free"}, "max_cost_usd": 5})
	capped := s.create(t, map[string]any{"agent": "demo-model", "name": "capped", "models": map[string]string{"anthropic": "free"}, "max_tokens": 10})
	tab := uiPage(t, b, s, "/sessions/"+budget.ID)
	tab.WaitFor("the budget in the header", `(document.querySelector('.session-head .spend')||{innerText:''}).innerText == 'Spend: $0.0000 · 0 tokens · $5.0000 left'`)
	// The list is opened last: a tab in the background draws no frames,
	// and the list redraws on the next one.
	list := uiPage(t, b, s, "/")
	spendOf := func(id string) string {
		return fmt.Sprintf(`(document.querySelector('tr[data-id=%q] td[data-label=Spend]')||{innerText:''}).innerText`, id)
	}
	list.WaitFor("a budget but no call yet", spendOf(budget.ID)+` == '$0.0000 · 0 tokens · $5.0000 left'`)

	for _, id := range []string{budget.ID, capped.ID} {
		if r := s.turn(t, id, "llm hello"); r.Text != "llm: 200 stub: hello" {
			t.Fatalf("the model call: %+v", r)
		}
	}
	u := s.session(t, budget.ID).Usage
	if u.ModelCalls != 1 || u.CostUSD <= 0 {
		t.Fatalf("usage after one priced call: %+v", u)
	}
	tokens := u.Tokens()
	want := fmt.Sprintf("$%.4f · %d tokens · $%.4f left", u.CostUSD, tokens, 5-u.CostUSD)
	// The list was not reloaded: the stream brought the new usage.
	list.WaitFor("the spend after the call, live", spendOf(budget.ID)+fmt.Sprintf(` == %q`, want))
	list.WaitFor("the capped session over budget", spendOf(capped.ID)+fmt.Sprintf(` == %q`, fmt.Sprintf("$%.4f · %d tokens · over budget", u.CostUSD, tokens)))
	shot(t, list, "sessions-spend")

	// Nor was the session's page.
	tab.WaitFor("the spend in the header, live", `(document.querySelector('.session-head .spend')||{innerText:''}).innerText == `+fmt.Sprintf("%q", "Spend: "+want))
	shot(t, tab, "session-spend")
	over := uiPage(t, b, s, "/sessions/"+capped.ID)
	over.WaitFor("over budget in the header", `(document.querySelector('.session-head .spend.over')||{innerText:''}).innerText.endsWith('over budget')`)
	noPageErrors(t, list)
	noPageErrors(t, tab)
}

// The New session form starts on demo while no agent's credential is set,
// marks each agent that needs one with its name, and starts on an agent
// whose credential is set once one is.
func TestUINewSessionStartsOnAReadyAgent(t *testing.T) {
	b := browsertest.New(t)
	s, _ := modelServer(t, nil)
	agentValue := `document.getElementById('ns-agent').value`
	optionText := func(name string) string {
		return fmt.Sprintf(`(document.querySelector('#ns-agent option[value=%q]')||{textContent:''}).textContent`, name)
	}
	tab := uiPage(t, b, s, "/")
	tab.WaitFor("the agents in the form", optionText("demo-model")+` != ''`)
	var got string
	tab.Eval(agentValue, &got)
	if got != "demo" {
		t.Fatalf("with no credential set the form starts on %q, want demo", got)
	}
	tab.Eval(optionText("demo-model"), &got)
	if got != "demo-model — needs credential anthropic" {
		t.Fatalf("demo-model's option = %q", got)
	}
	// An agent npx would download at its first start says so.
	var before struct{ Agents []berth.AgentInfo }
	if st, err := s.api("GET", "/v1/agents", nil, &before); st != 200 || err != nil {
		t.Fatalf("agents: %d %v", st, err)
	}
	for _, a := range before.Agents {
		tab.Eval(optionText(a.Name), &got)
		if a.Available && a.Fetch != strings.Contains(got, " — downloads on first use") {
			t.Errorf("%s (fetch %v): option %q", a.Name, a.Fetch, got)
		}
	}
	tab.Run(browsertest.Click(browsertest.Button("New session")))
	shot(t, tab, "new-session-first-run")

	if st, err := s.api("PUT", "/v1/credentials/anthropic", map[string]any{"value": "sk-ant-api03-0123456789abcdef"}, nil); st != 200 || err != nil {
		t.Fatalf("set the credential: %d %v", st, err)
	}
	var agents struct{ Agents []berth.AgentInfo }
	if st, err := s.api("GET", "/v1/agents", nil, &agents); st != 200 || err != nil {
		t.Fatalf("agents: %d %v", st, err)
	}
	ready := map[string]bool{}
	for _, a := range agents.Agents {
		if a.Available && a.CredentialSet {
			ready[a.Name] = true
		}
	}
	if !ready["demo-model"] {
		t.Fatalf("demo-model is not ready once its credential is set: %+v", agents.Agents)
	}
	tab.Run(chromedp.Reload())
	tab.WaitFor("the agents in the form", optionText("demo-model")+` == 'demo-model'`)
	tab.Eval(agentValue, &got)
	if !ready[got] {
		t.Fatalf("with the credential set the form starts on %q, want one of %v", got, ready)
	}
	var text string
	tab.Eval(optionText(got), &text)
	if strings.Contains(text, "needs credential") {
		t.Fatalf("the form starts on %q, whose option says %q", got, text)
	}
	noPageErrors(t, tab)
}
