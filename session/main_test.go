package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/internal/mcptest"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/snapshot"
	"github.com/berth-sh/berth/store/sqlite"

	live "github.com/berth-sh/berth/session/live"
)

// agentEnvVar makes the test binary run the demo agent instead of tests, so
// sessions run the real agent as a real child process.
const agentEnvVar = "BERTH_SESSION_TEST_AGENT"

func TestMain(m *testing.M) {
	// The test MCP server that sessions' agents start as a stdio server.
	mcptest.MaybeServeStdio()
	if len(os.Args) > 1 && os.Args[1] == "agent-exec" {
		// The model gateway's relay (berth agent-exec) over the agent.
		os.Exit(runRelay(os.Args[2:]))
	}
	switch os.Getenv(agentEnvVar) {
	case "demo":
		os.Exit(demoagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "scripted":
		os.Exit(scriptedAgent(os.Stdin, os.Stdout))
	case "self-deciding":
		os.Exit(selfDecidingAgent(os.Stdin, os.Stdout))
	case "shim":
		os.Exit(runShim())
	case "nodewrap":
		os.Exit(nodeWrap())
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { leaveTestCgroup() }))
}

// testCatalog is a fixed agent catalog for tests.
type testCatalog map[string]berth.AgentSpec

func (c testCatalog) Get(name string) (berth.AgentSpec, bool) { s, ok := c[name]; return s, ok }
func (c testCatalog) List() []berth.AgentInfo {
	var out []berth.AgentInfo
	for _, s := range c {
		// As config.Catalog's: the model API, none shown as "".
		info := berth.AgentInfo{Name: s.Name, Command: s.Command, Available: true}
		if s.ModelAPI != berth.ModelAPINone {
			info.ModelAPI = s.ModelAPI
		}
		out = append(out, info)
	}
	return out
}

// catalog has the demo agent (this test binary) and a few broken agents.
func catalog() testCatalog {
	self, _ := os.Executable()
	return testCatalog{
		"demo":            {Name: "demo", Command: self, Env: map[string]string{agentEnvVar: "demo"}},
		"demo-noload":     {Name: "demo-noload", Command: self, Args: []string{"--no-load"}, Env: map[string]string{agentEnvVar: "demo"}},
		"demo-nocontrols": {Name: "demo-nocontrols", Command: self, Args: []string{"--no-controls"}, Env: map[string]string{agentEnvVar: "demo"}},
		"scripted":        {Name: "scripted", Command: self, Env: map[string]string{agentEnvVar: "scripted"}},
		"scripted-huge":   {Name: "scripted-huge", Command: self, Env: map[string]string{agentEnvVar: "scripted", scriptedHugeInit: "1"}},
		"exits":           {Name: "exits", Command: "/bin/sh", Args: []string{"-c", "echo 'no credentials found' >&2; exit 3"}},
		"missing":         {Name: "missing", Command: "/nonexistent/agent"},
		"silent":          {Name: "silent", Command: "/bin/sh", Args: []string{"-c", "exec sleep 60"}},
		"demo-auth":       {Name: "demo-auth", Command: self, Args: []string{"--require-auth"}, Env: map[string]string{agentEnvVar: "demo"}},
		"demo-failnew":    {Name: "demo-failnew", Command: self, Args: []string{"--fail-new", "--require-auth"}, Env: map[string]string{agentEnvVar: "demo"}},
		// The demo agent given a credential by the catalog, as a real agent is.
		"demo-creds": {Name: "demo-creds", Command: self, Env: map[string]string{agentEnvVar: "demo"},
			PassEnv: []string{"BERTH_TEST_API_KEY"}, HomeFiles: []string{".test-agent/auth.json"}},
		// An agent whose own modes answer permissions by themselves, as Claude Code's do.
		"self-deciding": {Name: "self-deciding", Command: self, Env: map[string]string{agentEnvVar: "self-deciding"},
			SelfDecidingModes: []string{"auto", "acceptEdits", "bypassPermissions"}, AskingMode: "default"},
	}
}

// env is a manager over a real SQLite store and event log in a temp home.
type env struct {
	t     *testing.T
	home  string
	store berth.Store
	log   *eventlog.Log
	m     *Manager
	// logOpts are the event log's options; wrap, when set, stands between
	// the store and everything over it.
	logOpts eventlog.Options
	wrap    func(berth.Store) berth.Store
}

// newEnv opens a manager; it is closed at the end of the test.
func newEnv(t *testing.T, tweak ...func(*Options)) *env {
	t.Helper()
	home := t.TempDir()
	e := &env{t: t, home: home}
	e.open(tweak...)
	t.Cleanup(e.close)
	return e
}

// opBound bounds each blocking call of the env's helpers (testenv.Bound):
// past it the test fails naming the call, with every goroutine's stack,
// instead of hanging the package until go test's timeout. Generous: CI
// runs the race detector on two cores shared with other packages.
const opBound = 2 * time.Minute

// bound is testenv.Bound of one of e's calls, named what.
func (e *env) bound(what string) (context.Context, func()) {
	return testenv.Bound(e.t, what, opBound)
}

// open opens the store, log and manager over e.home.
func (e *env) open(tweak ...func(*Options)) {
	t := e.t
	ctx, done := e.bound("open the manager")
	defer done()
	st, err := sqlite.Open(ctx, filepath.Join(e.home, "berth.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var over berth.Store = st
	if e.wrap != nil {
		over = e.wrap(st)
	}
	lg := eventlog.New(over, e.logOpts)
	if err := lg.Open(); err != nil {
		t.Fatal(err)
	}
	opts := Options{Store: over, Log: lg, Catalog: catalog(), Providers: []berth.SandboxProvider{host.New()},
		Sandbox: SandboxPolicy{Default: berth.SandboxHost, AllowHost: true, AllowNetwork: true},
		Limits: live.Limits{MaxPromptBytes: 256 << 10, HandshakeTimeout: 5 * time.Second, StopGrace: 2 * time.Second,
			CancelGrace: 2 * time.Second},
		Home: e.home, NodeID: "node_test", Version: "test", Snapshots: snapshot.New(filepath.Join(e.home, "snapshots"))}
	for _, f := range tweak {
		f(&opts)
	}
	m := New(opts)
	if err := m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	// The tests read what the boot left: they wait for it to be over.
	select {
	case <-m.Booted():
	case <-ctx.Done():
		t.Fatalf("the manager's boot: %v", ctx.Err())
	}
	e.store, e.log, e.m = st, lg, m
}

// close shuts the manager, log and store down.
func (e *env) close() {
	if e.m == nil {
		return
	}
	ctx, done := e.bound("close the manager")
	defer done()
	if err := e.m.Close(ctx); err != nil {
		e.t.Error(err)
	}
	if err := e.log.Close(ctx); err != nil {
		e.t.Error(err)
	}
	if err := e.store.Close(); err != nil {
		e.t.Error(err)
	}
	e.m = nil
}

// create creates a demo session and checks it started.
func (e *env) create(req berth.CreateRequest) *berth.Session {
	e.t.Helper()
	if req.Agent == "" {
		req.Agent = "demo"
	}
	ctx, done := e.bound("create")
	defer done()
	s, err := e.m.CreateSession(ctx, req)
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	return s
}

// promptBound bounds one turn of prompt.
const promptBound = 30 * time.Second

// prompt runs one turn to its end.
func (e *env) prompt(id, text string) *berth.TurnResult {
	e.t.Helper()
	res, err := e.tryPrompt(id, text)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// tryPrompt is prompt for a goroutine other than the test's, which must
// not end the test (t.Fatal there ends only that goroutine): it returns
// what went wrong.
func (e *env) tryPrompt(id, text string) (*berth.TurnResult, error) {
	ctx, done := testenv.Bound(e.t, fmt.Sprintf("prompt %q", text), promptBound)
	defer done()
	r, err := e.m.Prompt(ctx, id, berth.PromptRequest{Text: text})
	if err != nil {
		return nil, fmt.Errorf("prompt %q: %w", text, err)
	}
	res, err := e.m.WaitTurn(ctx, id, r.TurnID)
	if err != nil {
		return nil, fmt.Errorf("prompt %q: wait turn: %w", text, err)
	}
	return res, nil
}

// events returns a session's whole committed log.
func (e *env) events(id string) []berth.Event {
	e.t.Helper()
	ctx, done := e.bound("read the log of " + id)
	defer done()
	if err := e.log.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	var out []berth.Event
	after := int64(0)
	for {
		evs, err := e.m.ListEvents(ctx, id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) == 0 {
			return out
		}
		after = evs[len(evs)-1].Seq
	}
}

// pendingOne waits until list returns one pending item (more is fatal)
// and returns it.
func pendingOne[T any](e *env, what string, list func() ([]*T, error)) *T {
	e.t.Helper()
	// list's calls take no context: the watchdog alone bounds them.
	_, done := e.bound("wait for a pending " + what)
	defer done()
	var one *T
	waitFor(e.t, "a pending "+what, func() bool {
		items, err := list()
		if err != nil {
			e.t.Fatal(err)
		}
		if len(items) > 1 {
			e.t.Fatalf("%d pending %ss", len(items), what)
		}
		if len(items) == 1 {
			one = items[0]
		}
		return one != nil
	})
	return one
}

// eventData decodes the data of a session's events of type typ.
func eventData[T any](e *env, id, typ string) []T {
	e.t.Helper()
	var out []T
	for _, ev := range ofType(e.events(id), typ) {
		var d T
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// types lists the event types of evs.
func types(evs []berth.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// ofType returns the events of one type.
func ofType(evs []berth.Event, typ string) []berth.Event {
	var out []berth.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// checkContiguous fails unless seq runs 1..N.
func checkContiguous(t *testing.T, evs []berth.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: log not contiguous (%v)", ev.Seq, i, types(evs))
		}
	}
}

// waitFor polls cond until it holds, for 20 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, what, cond)
}

// openingAFIFO reports whether a thread of this process is blocked in
// open(2) of a FIFO that has no writer, as the kernel shows it.
func openingAFIFO() bool {
	tasks, _ := filepath.Glob("/proc/self/task/*/wchan")
	for _, w := range tasks {
		if b, _ := os.ReadFile(w); string(b) == "wait_for_partner" {
			return true
		}
	}
	return false
}

// processGone reports whether pid no longer exists (not even as a zombie).
func processGone(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return os.IsNotExist(err)
}

// crash simulates a daemon that died: its log and store are closed as they
// stand, its agents are left running and nothing closes the sessions; a
// new manager opens on the same home (and reconciles).
func (e *env) crash() {
	e.t.Helper()
	ctx, done := e.bound("close the crashed daemon's log and store")
	err := e.log.Close(ctx)
	if err == nil {
		err = e.store.Close()
	}
	done()
	if err != nil {
		e.t.Fatal(err)
	}
	dead := e.m
	e.open()
	e.t.Cleanup(func() { abandon(dead) })
}
