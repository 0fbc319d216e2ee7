package live

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/store/memory"
)

// harness runs live sessions of the demo agent without a manager: the
// host is the smallest one that works (a memory store, a real event log,
// the host provider), which is what the seam to the manager asks for.
type harness struct {
	t     *testing.T
	store berth.Store
	log   *eventlog.Log
	host  *Host
	wg    sync.WaitGroup

	mu   sync.Mutex
	live []*Session
	// abandoned is set by a test that found its sessions deadlocked:
	// stopping them would wait for good.
	abandoned bool
}

// newHarness opens a host; tweak may change it (a wrapped store, limits)
// before any session starts. Everything is closed at the end of the test.
func newHarness(t *testing.T, tweak ...func(*Host)) *harness {
	t.Helper()
	var st berth.Store = memory.New()
	hs := &harness{t: t}
	h := &Host{Store: st, Observer: nopObserver{}, Version: "test", NodeID: "node_test",
		Limits:  Limits{HandshakeTimeout: 5 * time.Second, StopGrace: 2 * time.Second, CancelGrace: 2 * time.Second},
		Publish: func(string, json.RawMessage) string { return "" }, Monitors: &hs.wg,
		ShimToken: func(id, socket string) string { return "token:" + id + ":" + socket },
		LeaseLost: func(string) {}, Sweep: func(string) {}, ReleaseLease: func(context.Context, string) {},
		RevokeTools: func(string, bool) {}, CopyHomeFiles: func([]string, string) error { return nil },
		TranscriptPreamble: func(context.Context, string) (string, error) { return "", nil },
		LastTurnText:       func(context.Context, string) (string, string, error) { return "", "", nil },
		Tree:               noTree{}, TurnCheckpoints: func(string) map[string]bool { return nil },
		ToLive:                  func(string, string, map[string]any) bool { return false },
		CancelStoredElicitation: func(context.Context, *berth.Elicitation) {},
	}
	h.Forget = hs.forget
	h.Prepare = prepareDemo
	for _, f := range tweak {
		f(h)
	}
	hs.store = h.Store
	hs.log = eventlog.New(h.Store, eventlog.Options{})
	if err := hs.log.Open(); err != nil {
		t.Fatal(err)
	}
	h.Log = hs.log
	hs.host = h
	t.Cleanup(hs.close)
	return hs
}

// prepareDemo starts the demo agent (this test binary) on the host.
func prepareDemo(s *berth.Session, spec berth.AgentSpec, _ berth.SandboxProvider) AgentStart {
	self, _ := os.Executable()
	env := map[string]string{agentEnvVar: "demo", "PATH": os.Getenv("PATH"), "BERTH_SESSION_ID": s.ID}
	return AgentStart{Program: self, Box: berth.SandboxConfig{SessionID: s.ID, Workspace: s.Workspace,
		Home: filepath.Join(s.Workspace, ".home"), Env: env}}
}

// start creates and starts a demo session, as each of with has it, and
// checks it is active.
func (hs *harness) start(with ...func(*berth.Session)) *Session {
	t := hs.t
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	id := ids.New("ses")
	s := &berth.Session{ID: id, Agent: "demo", State: berth.StateStarting, Badge: berth.BadgeStarting,
		Workspace: t.TempDir(), Sandbox: berth.SandboxSpec{Provider: berth.SandboxHost},
		PermissionMode: berth.PermApproveReads, RootID: id, Labels: map[string]string{},
		CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
	for _, f := range with {
		f(s)
	}
	if err := os.MkdirAll(filepath.Join(s.Workspace, ".home"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := hs.store.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	ls := New(hs.host, Config{Session: s, Spec: berth.AgentSpec{Name: "demo", Command: self}, Logger: slog.New(slog.DiscardHandler)})
	hs.mu.Lock()
	hs.live = append(hs.live, ls)
	hs.mu.Unlock()
	if err := ls.Start(ctx, ls.Launch(ctx, host.New())); err != nil {
		t.Fatalf("start: %v", err)
	}
	if v := ls.View(); v.State != berth.StateActive {
		t.Fatalf("session %s: %+v", v.State, v.Failure)
	}
	return ls
}

// forget is Host.Forget: a stopped session leaves the harness's set.
func (hs *harness) forget(ls *Session) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i, o := range hs.live {
		if o == ls {
			hs.live = append(hs.live[:i], hs.live[i+1:]...)
			return
		}
	}
}

// prompt runs one turn to its end.
func (hs *harness) prompt(ls *Session, text string) *berth.TurnResult {
	t := hs.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ls.Prompt(ctx, berth.ModeQueue, in)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	res, _, err := ls.WaitTurn(ctx, r.TurnID)
	if err != nil || res == nil {
		t.Fatalf("wait turn: %+v %v", res, err)
	}
	return res
}

// events returns a session's whole committed log.
func (hs *harness) events(id string) []berth.Event {
	t := hs.t
	t.Helper()
	ctx := context.Background()
	if err := hs.log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := hs.store.ListEvents(ctx, id, berth.EventFilter{Limit: berth.MaxEventLimit})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// abandon leaves the sessions as they are when the test ends.
func (hs *harness) abandon() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.abandoned = true
}

// close stops every live session, then closes the log.
func (hs *harness) close() {
	ctx := context.Background()
	hs.mu.Lock()
	live := append([]*Session(nil), hs.live...)
	abandoned := hs.abandoned
	hs.mu.Unlock()
	if abandoned {
		return
	}
	for _, ls := range live {
		ls.Stop(ctx, berth.StopUserRequested, nil)
	}
	hs.wg.Wait()
	if err := hs.log.Close(ctx); err != nil {
		hs.t.Error(err)
	}
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) SessionCreated(string, bool, time.Duration) {}
func (nopObserver) TurnEnded(string, time.Duration)            {}
func (nopObserver) PermissionDecided(string, time.Duration)    {}
func (nopObserver) AgentExited(berth.StopReason, string)       {}

// noTree is a tree of one session.
type noTree struct{}

func (noTree) StopChildren(context.Context, string)    {}
func (noTree) ParentLive(string) bool                  { return false }
func (noTree) ToParent(string, string, map[string]any) {}

// The smallest host runs a live session: it starts, takes a turn and
// stops, its log gap-free from session_created's successor to
// session_stopped.
func TestHarnessRunsASession(t *testing.T) {
	hs := newHarness(t)
	ls := hs.start()
	if res := hs.prompt(ls, "echo hello"); res.StopReason != "end_turn" {
		t.Fatalf("turn: %+v", res)
	}
	ls.Stop(context.Background(), berth.StopUserRequested, nil)
	<-ls.Done()
	evs := hs.events(ls.ID())
	if len(evs) == 0 || evs[len(evs)-1].Type != berth.EventSessionStopped {
		t.Fatalf("events: %v", evs)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", ev.Seq, i)
		}
	}
}

// waitFor polls cond until it holds, for 20 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, what, cond)
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
