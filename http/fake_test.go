package http

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
)

// fakeService is an in-memory berth.SessionService for the HTTP edge's
// tests: it records what it was asked and answers what the test set.
type fakeService struct {
	mu       sync.Mutex
	sessions map[string]*berth.Session
	events   map[string][]berth.Event
	stopped  map[string]bool
	// changed is closed and replaced whenever events or stopped change.
	changed chan struct{}

	// err, when set, is returned by every method that can fail.
	err error
	// panicOn names a method that panics.
	panicOn string
	// pageSize bounds the events one Next returns (0: all).
	pageSize int
	// streamErr, when set, is returned by Next once the stored events are read.
	streamErr error

	promptResult berth.PromptResult
	turnResult   berth.TurnResult
	// waitBlocks makes WaitTurn block until its context ends, or until
	// waitRelease (when set) is closed.
	waitBlocks  bool
	waitRelease chan struct{}

	// calls counts the service methods entered (Health and Agents aside).
	calls int

	lastCreate     berth.CreateRequest
	lastPrompt     berth.PromptRequest
	lastWaitTurn   string
	lastSessionF   berth.SessionFilter
	lastEventF     berth.EventFilter
	lastStreamFrom int64
	streamCalls    int

	// queue and perms are what the input and permission routes serve.
	queue        []*berth.QueueEntry
	perms        []*berth.Permission
	lastDecision berth.PermissionDecision

	// spawns are the SpawnChild calls (see children_test.go).
	spawns []spawnCall

	// feed serves StreamChanges (see global_stream_test.go).
	feed *changefeed.Feed
}

// newFakeService returns a fake holding one active session "ses_1".
func newFakeService() *fakeService {
	f := &fakeService{
		sessions: map[string]*berth.Session{},
		events:   map[string][]berth.Event{},
		stopped:  map[string]bool{},
		changed:  make(chan struct{}),
		feed:     changefeed.New(8),
	}
	f.sessions["ses_1"] = &berth.Session{ID: "ses_1", Name: "one", Agent: "demo", State: berth.StateActive,
		Badge: berth.BadgeIdle, Labels: map[string]string{"team": "web"}, CreatedAt: time.Unix(100, 0).UTC()}
	f.promptResult = berth.PromptResult{Status: "started", TurnID: "turn_1"}
	f.turnResult = berth.TurnResult{TurnID: "turn_1", StopReason: berth.TurnEndTurn, Text: "hello"}
	return f
}

// appendEvents adds n events of type typ to a session's log.
func (f *fakeService) appendEvents(id string, n int, typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		seq := int64(len(f.events[id]) + 1)
		ev := berth.NewEvent(id, "turn_1", typ, map[string]any{"text": fmt.Sprintf("chunk %d\nline two", seq)})
		ev.Seq = seq
		f.events[id] = append(f.events[id], ev)
	}
	f.bump()
}

// stop marks a session stopped: its streams end once read.
func (f *fakeService) stop(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped[id] = true
	f.bump()
}

// bump wakes every stream waiting in Next. f.mu is held.
func (f *fakeService) bump() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// enter records a call, and fails or panics as the test asked. f.mu is held.
func (f *fakeService) enter(method string) error {
	f.calls++
	if f.panicOn == method {
		panic("fake panic in " + method)
	}
	return f.err
}

// session returns a copy of a session or ENotFound. f.mu is held.
func (f *fakeService) session(id string) (*berth.Session, error) {
	s, ok := f.sessions[id]
	if !ok {
		return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	cp := *s
	return &cp, nil
}

// inSession calls fn, under f.mu, with a copy of session id (ENotFound when
// there is none) once method was entered (enter; "" for a method that
// neither counts nor fails as the test asked).
func inSession[T any](f *fakeService, method, id string, fn func(*berth.Session) (T, error)) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	if method != "" {
		if err := f.enter(method); err != nil {
			return zero, err
		}
	}
	s, err := f.session(id)
	if err != nil {
		return zero, err
	}
	return fn(s)
}

// same returns the session it is given: for fakes that change nothing.
func same(s *berth.Session) (*berth.Session, error) { return s, nil }

// awaitWaitTurn polls until a request is parked in f's WaitTurn; what
// names the request when it never gets there.
func awaitWaitTurn(t *testing.T, f *fakeService, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		waiting := f.lastWaitTurn != ""
		f.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached WaitTurn", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Health implements berth.SessionService.
func (f *fakeService) Health(context.Context) (*berth.Health, error) {
	return &berth.Health{Status: "ok", Store: "sqlite", NodeID: "node_1"}, nil
}

// Agents implements berth.SessionService.
func (f *fakeService) Agents(context.Context) ([]berth.AgentInfo, error) {
	return []berth.AgentInfo{{Name: "demo", Command: "berth", Args: []string{"agent-demo"}, Available: true, Description: "demo agent"}}, nil
}

// InstallAgent implements berth.SessionService.
func (f *fakeService) InstallAgent(_ context.Context, name string) (berth.AgentInfo, error) {
	return berth.AgentInfo{}, berth.Errorf(berth.EInvalid, "agent %q is not run by npx", name)
}

// CreateSession implements berth.SessionService.
func (f *fakeService) CreateSession(_ context.Context, req berth.CreateRequest) (*berth.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateSession"); err != nil {
		return nil, err
	}
	f.lastCreate = req
	labels := req.Labels
	if labels == nil {
		// As the manager does: a session's labels are {} when it has none.
		labels = map[string]string{}
	}
	s := &berth.Session{ID: "ses_new", Name: req.Name, Agent: req.Agent, State: berth.StateActive, Badge: berth.BadgeIdle, Labels: labels}
	f.sessions[s.ID] = s
	cp := *s
	return &cp, nil
}

// GetSession implements berth.SessionService.
func (f *fakeService) GetSession(_ context.Context, id string) (*berth.Session, error) {
	return inSession(f, "GetSession", id, same)
}

// ListSessions implements berth.SessionService.
func (f *fakeService) ListSessions(_ context.Context, flt berth.SessionFilter) (*berth.SessionPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ListSessions"); err != nil {
		return nil, err
	}
	f.lastSessionF = flt
	page := &berth.SessionPage{}
	for _, s := range f.sessions {
		if flt.State != "" && s.State != flt.State {
			continue
		}
		cp := *s
		page.Sessions = append(page.Sessions, &cp)
	}
	return page, nil
}

// StopSession implements berth.SessionService.
func (f *fakeService) StopSession(_ context.Context, id string) (*berth.Session, error) {
	return inSession(f, "StopSession", id, func(s *berth.Session) (*berth.Session, error) {
		f.sessions[id].State, f.sessions[id].StopReason = berth.StateStopped, berth.StopUserRequested
		s.State, s.StopReason = berth.StateStopped, berth.StopUserRequested
		return s, nil
	})
}

// DeleteSession implements berth.SessionService.
func (f *fakeService) DeleteSession(_ context.Context, id string) error {
	_, err := inSession(f, "DeleteSession", id, func(*berth.Session) (any, error) {
		delete(f.sessions, id)
		return nil, nil
	})
	return err
}

// Prompt implements berth.SessionService.
func (f *fakeService) Prompt(_ context.Context, id string, req berth.PromptRequest) (*berth.PromptResult, error) {
	return inSession(f, "Prompt", id, func(*berth.Session) (*berth.PromptResult, error) {
		f.lastPrompt = req
		res := f.promptResult
		return &res, nil
	})
}

// WaitTurn implements berth.SessionService.
func (f *fakeService) WaitTurn(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	f.mu.Lock()
	f.lastWaitTurn = turnID
	blocks, release := f.waitBlocks, f.waitRelease
	res := f.turnResult
	f.mu.Unlock()
	if blocks {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
		}
	}
	return &res, nil
}

// Cancel implements berth.SessionService.
func (f *fakeService) Cancel(_ context.Context, id string) (string, error) {
	return inSession(f, "Cancel", id, func(*berth.Session) (string, error) { return "turn_1", nil })
}

// ListEvents implements berth.SessionService.
func (f *fakeService) ListEvents(_ context.Context, id string, flt berth.EventFilter) ([]berth.Event, error) {
	return inSession(f, "ListEvents", id, func(*berth.Session) ([]berth.Event, error) {
		f.lastEventF = flt
		var out []berth.Event
		for _, ev := range f.events[id] {
			if ev.Seq > flt.After && (flt.Type == "" || ev.Type == flt.Type) && len(out) < flt.Limit {
				out = append(out, ev)
			}
		}
		return out, nil
	})
}

// StreamEvents implements berth.SessionService.
func (f *fakeService) StreamEvents(_ context.Context, id string, after int64) (berth.EventStream, error) {
	return inSession(f, "StreamEvents", id, func(*berth.Session) (berth.EventStream, error) {
		f.lastStreamFrom = after
		f.streamCalls++
		return &fakeStream{f: f, id: id, pos: after}, nil
	})
}

// Transcript implements berth.SessionService.
func (f *fakeService) Transcript(_ context.Context, id string) ([]berth.TranscriptTurn, error) {
	return inSession(f, "Transcript", id, func(*berth.Session) ([]berth.TranscriptTurn, error) {
		return []berth.TranscriptTurn{{TurnID: "turn_1", Prompt: "hi", Text: "hello", StopReason: berth.TurnEndTurn, StartSeq: 1}}, nil
	})
}

// fakeStream follows a fakeService's log the way berth.EventStream promises.
type fakeStream struct {
	f   *fakeService
	id  string
	pos int64
}

// Next returns the events after pos, waiting for some; io.EOF once the
// session is stopped and read; streamErr once read, when set.
func (s *fakeStream) Next(ctx context.Context) ([]berth.Event, error) {
	for {
		s.f.mu.Lock()
		var out []berth.Event
		for _, ev := range s.f.events[s.id] {
			if ev.Seq > s.pos && (s.f.pageSize == 0 || len(out) < s.f.pageSize) {
				out = append(out, ev)
			}
		}
		stopped, streamErr, changed := s.f.stopped[s.id], s.f.streamErr, s.f.changed
		s.f.mu.Unlock()
		switch {
		case len(out) > 0:
			s.pos = out[len(out)-1].Seq
			return out, nil
		case streamErr != nil:
			return nil, streamErr
		case stopped:
			return nil, io.EOF
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// Close does nothing.
func (s *fakeStream) Close() {}

// The fake must satisfy the interface the server serves.
var _ berth.SessionService = (*fakeService)(nil)

// ListQueue implements berth.SessionService.
func (f *fakeService) ListQueue(_ context.Context, id string) (*berth.QueueView, error) {
	return inSession(f, "ListQueue", id, func(*berth.Session) (*berth.QueueView, error) {
		return &berth.QueueView{Entries: f.queue, Generation: 3}, nil
	})
}

// CancelQueueEntry implements berth.SessionService.
func (f *fakeService) CancelQueueEntry(_ context.Context, id, entryID string) error {
	_, err := inSession(f, "", id, func(*berth.Session) (any, error) {
		for i, e := range f.queue {
			if e.ID == entryID {
				f.queue = append(f.queue[:i], f.queue[i+1:]...)
				return nil, nil
			}
		}
		return nil, berth.Errorf(berth.ENotFound, "no pending entry %s", entryID)
	})
	return err
}

// PatchSession implements berth.SessionService.
func (f *fakeService) PatchSession(_ context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	return inSession(f, "", id, func(s *berth.Session) (*berth.Session, error) {
		if p.Name != nil {
			s.Name = *p.Name
		}
		return s, nil
	})
}

// ResumeSession implements berth.SessionService.
func (f *fakeService) ResumeSession(_ context.Context, id string) (*berth.Session, error) {
	return inSession(f, "", id, func(s *berth.Session) (*berth.Session, error) {
		s.State = berth.StateActive
		return s, nil
	})
}

// ListPermissions implements berth.SessionService.
func (f *fakeService) ListPermissions(_ context.Context, id, state string) ([]*berth.Permission, error) {
	return inSession(f, "", id, func(*berth.Session) ([]*berth.Permission, error) {
		var out []*berth.Permission
		for _, p := range f.perms {
			if state == "" || p.State == state {
				out = append(out, p)
			}
		}
		return out, nil
	})
}

// DecidePermission implements berth.SessionService.
func (f *fakeService) DecidePermission(_ context.Context, id, permID string, d berth.PermissionDecision) (*berth.Permission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastDecision = d
	for _, p := range f.perms {
		if p.ID != permID {
			continue
		}
		if p.State != berth.PermissionPending {
			return nil, berth.Errorf(berth.EConflict, "already %s", p.State)
		}
		p.State, p.DecidedBy = berth.PermissionDecided, berth.DecidedByUser
		c := *p
		return &c, nil
	}
	return nil, berth.Errorf(berth.ENotFound, "no permission %s", permID)
}

// Exec implements berth.SessionService.
func (f *fakeService) Exec(_ context.Context, id string, req berth.ExecRequest) (*berth.ExecResult, error) {
	return inSession(f, "", id, func(*berth.Session) (*berth.ExecResult, error) {
		return &berth.ExecResult{ExitCode: 3, Stdout: strings.Join(req.Command, " "), DurationMS: 1}, nil
	})
}

// CreateSnapshot implements berth.SessionService.
func (f *fakeService) CreateSnapshot(_ context.Context, id string) (*berth.Snapshot, error) {
	return inSession(f, "", id, func(*berth.Session) (*berth.Snapshot, error) {
		return &berth.Snapshot{ID: "snap_1", SessionID: id, SizeBytes: 42, CreatedAt: time.Unix(5, 0).UTC()}, nil
	})
}

// ListSnapshots implements berth.SessionService.
func (f *fakeService) ListSnapshots(_ context.Context, id string) ([]*berth.Snapshot, error) {
	return inSession(f, "", id, func(*berth.Session) ([]*berth.Snapshot, error) { return nil, nil })
}

// Repair implements berth.SessionService.
func (f *fakeService) Repair(_ context.Context, id string, dryRun, force bool) (*berth.RepairReport, error) {
	return inSession(f, "", id, func(*berth.Session) (*berth.RepairReport, error) {
		return &berth.RepairReport{Issues: []berth.RepairItem{{Kind: berth.RepairOpenTurn, Message: fmt.Sprint(dryRun, force)}},
			Actions: []berth.RepairItem{}, Persisted: !dryRun}, nil
	})
}

// Authenticate implements berth.SessionService.
func (f *fakeService) Authenticate(_ context.Context, id, methodID string) (*berth.Session, error) {
	return inSession(f, "", id, same)
}

// ClearSession implements berth.SessionService.
func (f *fakeService) ClearSession(_ context.Context, id string, cancel bool) (*berth.Session, error) {
	return inSession(f, "", id, same)
}
