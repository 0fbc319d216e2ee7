package session

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/host"
)

// shAgent answers initialize and session/new, then runs tail (sh).
func shAgent(name, tail string) berth.AgentSpec {
	script := `read l; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}'; ` +
		`read l; printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'; ` + tail
	return berth.AgentSpec{Name: name, Command: "/bin/sh", Args: []string{"-c", script}}
}

func withAgents(specs ...berth.AgentSpec) func(*Options) {
	return func(o *Options) {
		c := catalog()
		for _, s := range specs {
			c[s.Name] = s
		}
		o.Catalog = c
	}
}

// hookStore lets a test intercept UpdateSession.
type hookStore struct {
	berth.Store
	onUpdate func(ctx context.Context, s *berth.Session, from berth.State) context.Context
}

func (h *hookStore) UpdateSession(ctx context.Context, s *berth.Session, from berth.State) error {
	if h.onUpdate != nil {
		ctx = h.onUpdate(ctx, s, from)
	}
	return h.Store.UpdateSession(ctx, s, from)
}

func withHook(hs *hookStore) func(*Options) {
	return func(o *Options) { hs.Store = o.Store; o.Store = hs }
}

// liveCount returns the number of live sessions.
func liveCount(m *Manager) int {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	return len(m.set.live)
}

// A create whose caller goes away during the handshake of an agent that
// never answers still ends, within the handshake timeout, with the session
// recorded stopped and its agent killed (it once hung: proc.Stop with a done
// ctx could return without signalling, and nothing closed ls.finished).
func TestCreateWhoseCallerLeavesDuringTheHandshakeEnds(t *testing.T) {
	e := newEnv(t, withAgents(berth.AgentSpec{Name: "mute", Command: "/bin/sh", Args: []string{"-c", "exec sleep 3600"}}),
		func(o *Options) { o.Limits.HandshakeTimeout = 300 * time.Millisecond })
	hung := 0
	for i := 0; i < 8; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan struct{})
		var id string
		go func() {
			defer close(done)
			s, _ := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "mute"})
			if s != nil {
				id = s.ID
			}
		}()
		select {
		case <-done:
			got, err := e.m.GetSession(context.Background(), id)
			if err != nil || got.State != berth.StateStopped || got.StopReason != berth.StopStartupFailed {
				t.Fatalf("session after the caller left = %+v, %v", got, err)
			}
		case <-time.After(5 * time.Second):
			hung++
			// Free it so the test can end: kill the agent we leaked.
			for _, ls := range e.m.set.all() {
				go ls.Stop(context.Background(), berth.StopUserRequested, nil)
			}
			<-done
		}
		cancel()
	}
	if hung > 0 {
		t.Errorf("%d/8 CreateSession calls hung after their ctx ended (agent never answered)", hung)
	}
}

// a create whose ctx ends right after the handshake (client hangs up)
// makes transition(active) fail; start() then waits <-ls.finished forever
// while the agent is alive, and Manager.Close waits for it forever.
func TestCreateWhoseCallerLeavesAtActivationEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	hs := &hookStore{onUpdate: func(c context.Context, s *berth.Session, from berth.State) context.Context {
		if s.State == berth.StateActive && from == berth.StateStarting {
			cancel() // the HTTP client hangs up at this moment
		}
		return c
	}}
	e := newEnv(t, withHook(hs))
	done := make(chan *berth.Session, 1)
	go func() {
		s, _ := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
		done <- s
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		var st berth.State
		for _, ls := range e.m.set.all() {
			st = ls.View().State
		}
		t.Errorf("CreateSession hung: session left in state %q with a live agent", st)
		hs.onUpdate = nil
		// Unblock: stop the session (the monitor closes finished).
		e.m.set.mu.Lock()
		for _, ls := range e.m.set.live {
			go ls.Stop(context.Background(), berth.StopUserRequested, nil)
		}
		e.m.set.mu.Unlock()
		<-done
	}
}

// slowProvider holds Open back, like docker pulling or creating a
// container, until released (or ctx ends): opening is closed on entry.
type slowProvider struct {
	*host.Provider
	opening, release chan struct{}
}

func (p slowProvider) Open(ctx context.Context, c berth.SandboxConfig) (berth.Sandbox, error) {
	close(p.opening)
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Provider.Open(ctx, c)
}

// StopSession (or DeleteSession) while the sandbox is being opened
// dereferences ls.proc == nil.
func TestStopWhileTheSandboxOpens(t *testing.T) {
	slow := slowProvider{Provider: host.New(), opening: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(o *Options) { o.Providers = []berth.SandboxProvider{slow} })
	created := make(chan struct{})
	go func() {
		defer close(created)
		e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo"})
	}()
	<-slow.opening
	var id string
	waitFor(t, "session registered", func() bool {
		e.m.set.mu.Lock()
		defer e.m.set.mu.Unlock()
		for k := range e.m.set.live {
			id = k
		}
		return id != ""
	})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("StopSession during sandbox open panicked: %v", r)
			}
		}()
		e.m.StopSession(context.Background(), id)
	}()
	// The open ends only once the stop has been taken.
	waitFor(t, "the stop to be taken", func() bool {
		ls := e.m.set.liveOf(id)
		return ls == nil || ls.Closing()
	})
	close(slow.release)
	<-stopped
	<-created
}

// an agent that exits while idle leaves the session "active" until the
// monitor has torn everything down; prompts accepted meanwhile log turns
// after session_stopped.
func TestPromptsDuringTeardownLogNothingAfterStopped(t *testing.T) {
	e := newEnv(t, withAgents(shAgent("brief", "sleep 0.3; exit 0")))
	bad := 0
	for i := 0; i < 10; i++ {
		s := e.create(berth.CreateRequest{Agent: "brief"})
		started := 0
		// Prompts race the teardown until the session has stopped once (a
		// prompt after that resumes it: a new live session, not this race).
		for len(ofType(e.events(s.ID), berth.EventSessionStopped)) == 0 {
			if _, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "x"}); err == nil {
				started++
			}
			time.Sleep(200 * time.Microsecond)
		}
		if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		evs := e.events(s.ID)
		checkContiguous(t, evs)
		// session_stopped ends the log, or a resume's first event follows it.
		for j, ev := range evs {
			if ev.Type != berth.EventSessionStopped || j == len(evs)-1 {
				continue
			}
			// (A resume that failed its handshake stops again at once.)
			if next := evs[j+1].Type; next != berth.EventSessionStarted && next != berth.EventRuntimeWarning && next != berth.EventSessionStopped {
				bad++
				t.Logf("run %d: %d turns started; %s follows session_stopped: %v", i, started, next, types(evs)[max(0, j-3):min(len(evs), j+3)])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d/10 sessions have events after session_stopped", bad)
	}
}

// a FIFO in the workspace blocks fs/read_text_file in open(2) forever;
// the connection's Close then waits for that handler forever, so the
// session can never stop (and Manager.Close hangs).
func TestFIFOsInTheWorkspaceCannotBlockTheDaemon(t *testing.T) {
	e := newEnv(t)
	ws := t.TempDir()
	fifo := filepath.Join(ws, "p")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: ws})
	if _, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "read p"}); err != nil {
		t.Fatal(err)
	}
	// The read has reached the handler: it answered and the turn ended, or
	// it is stuck opening the FIFO (the defect).
	waitFor(t, "the read to reach the fs handler", func() bool {
		return openingAFIFO() || len(ofType(e.events(s.ID), berth.EventTurnEnded)) > 0
	})
	stopped := make(chan struct{})
	go func() { e.m.StopSession(context.Background(), s.ID); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(8 * time.Second):
		t.Errorf("StopSession still blocked after 8s: the fs handler is stuck in open() on a FIFO")
		f, _ := os.OpenFile(fifo, os.O_WRONLY, 0) // unblock for cleanup
		f.Close()
		<-stopped
	}
}

// the agent exits right after answering session/new: start() emits
// session_started after the monitor already logged session_stopped.
func TestAgentExitRightAfterHandshakeEndsTheLog(t *testing.T) {
	e := newEnv(t, withAgents(shAgent("quick", "exit 0")))
	bad := 0
	for i := 0; i < 200; i++ {
		s := e.create(berth.CreateRequest{Agent: "quick"})
		waitFor(t, "stopped", func() bool { return e.m.set.liveOf(s.ID) == nil })
		evs := e.events(s.ID)
		if evs[len(evs)-1].Type != berth.EventSessionStopped {
			bad++
			t.Logf("log ends %v", types(evs))
		}
	}
	if bad > 0 {
		t.Errorf("%d/200 logs do not end with session_stopped", bad)
	}
}

// A terminal command that reads stdin never sees EOF: its stdin is a pipe
// whose write end berth holds until the process is reaped.
func TestTerminalCommandsSeeEOFOnStdin(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "run cat"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.m.WaitTurn(ctx, s.ID, r.TurnID); err != nil {
		t.Errorf("turn running `cat` did not end within 5s: %v", err)
	}
}

// cancelProvider cancels the create's ctx once the sandbox is open (the
// client hung up); the agent's start then fails.
type cancelProvider struct {
	*host.Provider
	cancel func()
}

func (p cancelProvider) Open(ctx context.Context, c berth.SandboxConfig) (berth.Sandbox, error) {
	sb, err := p.Provider.Open(ctx, c)
	p.cancel()
	return sb, err
}

// failStart with a done ctx returns before forget/close(finished): the
// live session stays "live" with ls.proc == nil; Manager.Close then panics.
func TestFailedStartLeavesNoRuntime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e := newEnv(t, func(o *Options) { o.Providers = []berth.SandboxProvider{cancelProvider{host.New(), cancel}} })
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "missing"})
	t.Logf("create: %v; live runtimes left: %d", err, liveCount(e.m))
	if liveCount(e.m) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Manager.Close panicked: %v", r)
			e.m = nil
		}
	}()
	// Close runs stop in goroutines, so call it the way Close does.
	for _, ls := range e.m.set.live {
		ls.Stop(context.Background(), berth.StopDaemonShutdown, nil)
	}
}

// listStore lets a test run something between a list's read of the rows
// and the manager's look at which of them are live.
type listStore struct {
	berth.Store
	afterList func()
}

func (l *listStore) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	page, err := l.Store.ListSessions(ctx, f)
	if fn := l.afterList; fn != nil && err == nil {
		l.afterList = nil
		fn()
	}
	return page, err
}

// A session that stops between a list's read of its row and the look at
// whether it is live is listed stopped, not as the row read before said
// (the web UI drew a stopped child as active, for good, from such a list).
func TestListSeesASessionThatStopsWhileListing(t *testing.T) {
	ls := &listStore{}
	e := newEnv(t, func(o *Options) { ls.Store = o.Store; o.Store = ls })
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	ls.afterList = func() {
		if _, err := e.m.StopSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 1 || page.Sessions[0].State != berth.StateStopped {
		t.Fatalf("listed %d sessions, the first %s, want the session stopped", len(page.Sessions), page.Sessions[0].State)
	}
}

// slowTurnEnds holds back the store's commit of a turn_ended.
type slowTurnEnds struct{ berth.Store }

func (s slowTurnEnds) AppendEvents(ctx context.Context, evs []berth.Event) error {
	for _, ev := range evs {
		if ev.Type == berth.EventTurnEnded {
			time.Sleep(300 * time.Millisecond)
		}
	}
	return s.Store.AppendEvents(ctx, evs)
}

// A turn's answer (prompt ?wait=true, GET …/turns/{turn}) comes once its
// turn_ended is in the log: a client that lists the events next finds
// the turn ended (contract-smoke saw the log end at agent_message).
func TestWaitTurnAnswersAfterTheTurnEndedIsLogged(t *testing.T) {
	e := &env{t: t, home: t.TempDir(), wrap: func(s berth.Store) berth.Store { return slowTurnEnds{s} }}
	e.open()
	t.Cleanup(e.close)
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "hello")
	evs, err := e.m.ListEvents(context.Background(), s.ID, berth.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1].Type; last != berth.EventTurnEnded {
		t.Fatalf("after the answer the log ends with %s, want turn_ended", last)
	}
}
