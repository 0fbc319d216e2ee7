package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

func TestCreateCompletesHandshakeBeforeReturning(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Name: "fix-login", Labels: map[string]string{"team": "web"}})
	if s.State != berth.StateActive || s.Badge != berth.BadgeIdle {
		t.Fatalf("state/badge = %s/%s, want active/idle", s.State, s.Badge)
	}
	if s.ACP.ProtocolVersion != 1 || s.ACP.SessionID == "" {
		t.Fatalf("acp = %+v", s.ACP)
	}
	if !strings.HasPrefix(s.ID, "ses_") || !s.ManagedWorkspace || !live.WorkspaceExists(s.Workspace) {
		t.Fatalf("session = %+v", s)
	}
	evs := e.events(s.ID)
	// The demo agent announces its commands before it answers session/new:
	// they are logged right after session_started.
	if got := types(evs); !slices.Equal(got, []string{berth.EventSessionCreated, berth.EventSessionStarted, berth.EventCommandsUpdate}) {
		t.Fatalf("log = %v", got)
	}
	if s.LastSeq != 3 {
		t.Fatalf("the create answer's last_seq = %d, want 3 (session_started and the commands included)", s.LastSeq)
	}
	var started struct {
		ProtocolVersion int    `json:"protocol_version"`
		ResumedBy       string `json:"resumed_by"`
	}
	if err := json.Unmarshal(evs[1].Data, &started); err != nil || started.ProtocolVersion != 1 {
		t.Fatalf("session_started data = %s", evs[1].Data)
	}
	stored, err := e.store.GetSession(context.Background(), s.ID)
	if err != nil || stored.State != berth.StateActive || stored.AgentPID == 0 {
		t.Fatalf("stored = %+v, %v", stored, err)
	}
}

func TestPromptRunsATurnWithAContiguousLog(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "echo hello\nthink hmm\nplan A|B\nusage 10 100\nsome plain text")
	if res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "hello") || !strings.Contains(res.Text, "some plain text") {
		t.Fatalf("result = %+v", res)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	got := types(evs)
	if got[0] != berth.EventSessionCreated || got[1] != berth.EventSessionStarted || got[2] != berth.EventCommandsUpdate ||
		got[3] != berth.EventTurnStarted || got[len(got)-1] != berth.EventTurnEnded {
		t.Fatalf("log = %v", got)
	}
	for _, typ := range []string{berth.EventAgentMessage, berth.EventAgentThought, berth.EventPlan, berth.EventUsage} {
		if len(ofType(evs, typ)) == 0 {
			t.Errorf("no %s in %v", typ, got)
		}
	}
	for _, ev := range evs[3:] {
		if ev.TurnID != res.TurnID {
			t.Fatalf("%s event %d carries turn %q, want %q", ev.Type, ev.Seq, ev.TurnID, res.TurnID)
		}
	}
	cur, _ := e.m.GetSession(context.Background(), s.ID)
	if cur.Turns != 1 || cur.LastSeq != int64(len(evs)) || cur.Badge != berth.BadgeIdle {
		t.Fatalf("session after the turn = turns %d last_seq %d badge %s (log %d)", cur.Turns, cur.LastSeq, cur.Badge, len(evs))
	}
	// A late waiter still gets the result.
	again, err := e.m.WaitTurn(context.Background(), s.ID, res.TurnID)
	if err != nil || again.Text != res.Text {
		t.Fatalf("late wait = %+v, %v", again, err)
	}
	tr, err := e.m.Transcript(context.Background(), s.ID)
	if err != nil || len(tr) != 1 || tr[0].Prompt == "" || tr[0].StopReason != berth.TurnEndTurn || tr[0].Text != res.Text {
		t.Fatalf("transcript = %+v, %v", tr, err)
	}
}

func TestCancelEndsASleepingTurnQuickly(t *testing.T) {
	// The grace outlasts the wait below and the sleep is a minute: only the
	// agent honouring the cancel ends the turn in time, whatever the
	// machine's speed.
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = time.Hour })
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	if _, err := e.m.Cancel(ctx, s.ID); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("cancel while idle = %v, want conflict", err)
	}
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "sleep 60000"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first sleep chunk", func() bool {
		return len(ofType(e.events(s.ID), berth.EventAgentMessage)) > 0
	})
	id, err := e.m.Cancel(ctx, s.ID)
	if err != nil || id != r.TurnID {
		t.Fatalf("cancel = %q, %v", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := e.m.WaitTurn(wctx, s.ID, r.TurnID)
	if err != nil || res.StopReason != berth.TurnCancelled {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if got, _ := e.m.GetSession(ctx, s.ID); got.State != berth.StateActive {
		t.Fatalf("session after cancel = %s", got.State)
	}
	// The session takes the next prompt.
	if res := e.prompt(s.ID, "echo after"); res.StopReason != berth.TurnEndTurn {
		t.Fatalf("next turn = %+v", res)
	}
}

func TestCancelGraceKillsAnAgentThatIgnoresIt(t *testing.T) {
	// An agent that reads the prompt and then nothing more, ever: the demo
	// agent's hang may still honour a cancel that reaches it before the
	// hang begins, which a loaded machine makes likely.
	e := newEnv(t, withAgents(shAgent("deaf", "read l; exec sleep 1000")),
		func(o *Options) { o.Limits.CancelGrace = 300 * time.Millisecond })
	s := e.create(berth.CreateRequest{Agent: "deaf"})
	ctx := context.Background()
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "anything"})
	if err != nil {
		t.Fatal(err)
	}
	pid := e.agentPID(s.ID)
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.WaitTurn(ctx, s.ID, r.TurnID)
	if err != nil || res.StopReason != berth.TurnCancelled {
		t.Fatalf("result = %+v, %v", res, err)
	}
	waitFor(t, "the session to stop", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	waitFor(t, "the agent to be reaped", func() bool { return processGone(pid) })
}

// agentPID returns the recorded process group of a live session's agent.
func (e *env) agentPID(id string) int {
	e.t.Helper()
	s, err := e.store.GetSession(context.Background(), id)
	if err != nil || s.AgentPID == 0 {
		e.t.Fatalf("no agent pid: %+v %v", s, err)
	}
	return s.AgentPID
}

func TestCrashStopsTheSessionAndReapsTheAgent(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	res := e.prompt(s.ID, "echo before\ncrash 3")
	if res.StopReason != berth.TurnError || res.Error == nil {
		t.Fatalf("result = %+v", res)
	}
	ctx := context.Background()
	waitFor(t, "the session to stop", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.StopReason != berth.StopAgentCrashed || got.Badge != berth.BadgeFailed || got.Failure == nil || got.Failure.Kind != berth.FailProcessExit || !got.Resumable {
		t.Fatalf("stopped session = %+v failure %+v", got, got.Failure)
	}
	waitFor(t, "the agent to be reaped", func() bool { return processGone(pid) })
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	tt := types(evs)
	if tt[len(tt)-1] != berth.EventSessionStopped || tt[len(tt)-2] != berth.EventTurnEnded {
		t.Fatalf("log tail = %v", tt)
	}
	var end struct {
		StopReason string `json:"stop_reason"`
	}
	_ = json.Unmarshal(evs[len(evs)-2].Data, &end)
	if end.StopReason != berth.TurnError {
		t.Fatalf("turn_ended = %s", evs[len(evs)-2].Data)
	}
	// A prompt to a stopped, resumable session resumes it first; the agent
	// reopens its conversation (the demo agent offers session/load).
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo back again"})
	if err != nil || r.Status != "started" {
		t.Fatalf("prompt to a stopped session = %+v, %v", r, err)
	}
	if res := e.waitResult(s.ID, r.TurnID); res.Text != "back again" {
		t.Fatalf("turn after resume: %+v", res)
	}
	evs = e.events(s.ID)
	checkContiguous(t, evs)
	startedEvs := ofType(evs, berth.EventSessionStarted)
	if len(startedEvs) != 2 || !strings.Contains(string(startedEvs[1].Data), `"resumed_by":"load"`) {
		t.Fatalf("session_started events: %v", startedEvs)
	}
	if got, _ := e.m.GetSession(ctx, s.ID); got.State != berth.StateActive || got.StopReason != "" || got.Failure != nil {
		t.Fatalf("resumed session = %+v", got)
	}
}

func TestAgentThatExitsCleanlyIsAgentExited(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "crash 0")
	waitFor(t, "the session to stop", func() bool {
		got, _ := e.m.GetSession(context.Background(), s.ID)
		return got.State == berth.StateStopped
	})
	got, _ := e.m.GetSession(context.Background(), s.ID)
	if got.StopReason != berth.StopAgentExited || got.Badge != berth.BadgeStopped {
		t.Fatalf("session = %s/%s", got.StopReason, got.Badge)
	}
}

func TestStopIsIdempotentAndEndsTheTurn(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	ctx := context.Background()
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "sleep 10000"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.m.StopSession(ctx, s.ID)
	if err != nil || got.State != berth.StateStopped || got.StopReason != berth.StopUserRequested || got.Badge != berth.BadgeStopped {
		t.Fatalf("stop = %+v, %v", got, err)
	}
	again, err := e.m.StopSession(ctx, s.ID)
	if err != nil || again.State != berth.StateStopped || again.UpdatedAt != got.UpdatedAt {
		t.Fatalf("second stop = %+v, %v", again, err)
	}
	if !processGone(pid) {
		t.Fatalf("agent %d still exists after stop", pid)
	}
	res, err := e.m.WaitTurn(ctx, s.ID, r.TurnID)
	if err != nil || res.StopReason != berth.TurnCancelled {
		t.Fatalf("turn after stop = %+v, %v", res, err)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	if last := evs[len(evs)-1]; last.Type != berth.EventSessionStopped {
		t.Fatalf("last event = %s", last.Type)
	}
}

func TestHandshakeFailureStoresAStoppedSessionWithTheAgentsWords(t *testing.T) {
	e := newEnv(t)
	s, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "exits"})
	if err != nil {
		t.Fatalf("create = %v, want a stopped session", err)
	}
	if s.State != berth.StateStopped || s.StopReason != berth.StopStartupFailed || s.Failure == nil ||
		s.Failure.Kind != berth.FailHandshake || !strings.Contains(s.Failure.Message, "no credentials found") {
		t.Fatalf("session = %+v failure %+v", s, s.Failure)
	}
	evs := e.events(s.ID)
	if last := evs[len(evs)-1]; last.Type != berth.EventSessionStopped || !strings.Contains(string(last.Data), "no credentials found") {
		t.Fatalf("last event = %s %s", last.Type, last.Data)
	}
	missing, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "missing"})
	if err != nil || missing.State != berth.StateStopped || missing.Failure == nil || missing.Failure.Kind != berth.FailStartup {
		t.Fatalf("missing command = %+v, %v", missing, err)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.HandshakeTimeout = 300 * time.Millisecond })
	// The caller's minute only turns a hang into a failure: the handshake
	// timeout's own message says which one ended the create.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "silent"})
	if err != nil || s.State != berth.StateStopped || s.Failure == nil || !strings.Contains(s.Failure.Message, "did not answer") {
		t.Fatalf("silent agent = %+v %v", s, err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	file := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(file, nil, 0o600)
	bad := []berth.CreateRequest{
		{Agent: "nope"},
		{Agent: ""},
		{Agent: "demo", Workspace: "/does/not/exist"},
		{Agent: "demo", Workspace: file},
		{Agent: "demo", Workspace: "relative/dir"},
		{Agent: "demo", PermissionMode: "yolo"},
		{Agent: "demo", Sandbox: "vm"},
		{Agent: "demo", Env: map[string]string{"BAD NAME": "x"}},
		{Agent: "demo", TTLSeconds: -1},
	}
	for _, req := range bad {
		if _, err := e.m.CreateSession(ctx, req); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("create %+v = %v, want invalid_argument", req, err)
		}
	}
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: "docker"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("unavailable provider = %v, want unavailable", err)
	}
	for _, text := range []string{"", "   \n\t"} {
		if _, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: text}); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("prompt %q = %v, want invalid_argument", text, err)
		}
	}
	if _, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: strings.Repeat("x", 256<<10+1)}); !berth.IsCode(err, berth.ETooLarge) {
		t.Errorf("huge prompt = %v, want payload_too_large", err)
	}
	for _, call := range []func() error{
		func() error { _, err := e.m.GetSession(ctx, "ses_missing"); return err },
		func() error { _, err := e.m.StopSession(ctx, "ses_missing"); return err },
		func() error { return e.m.DeleteSession(ctx, "ses_missing") },
		func() error { _, err := e.m.Prompt(ctx, "ses_missing", berth.PromptRequest{Text: "x"}); return err },
		func() error { _, err := e.m.Cancel(ctx, "ses_missing"); return err },
		func() error { _, err := e.m.ListEvents(ctx, "ses_missing", berth.EventFilter{}); return err },
		func() error { _, err := e.m.StreamEvents(ctx, "ses_missing", 0); return err },
		func() error { _, err := e.m.Transcript(ctx, "ses_missing"); return err },
	} {
		if err := call(); !berth.IsCode(err, berth.ENotFound) {
			t.Errorf("call on a missing session = %v, want not_found", err)
		}
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("sessions after bad input = %d, %v", len(page.Sessions), err)
	}
	if got := types(e.events(s.ID)); len(got) != 3 {
		t.Fatalf("log after bad prompts = %v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(e.home, "workspaces"))
	if len(entries) != 1 {
		t.Fatalf("%d workspaces after bad input, want 1", len(entries))
	}
}

func TestListFiltersAndPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.create(berth.CreateRequest{Labels: map[string]string{"team": "web"}})
	b := e.create(berth.CreateRequest{Labels: map[string]string{"team": "api"}})
	c := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{State: berth.StateActive})
	if err != nil || len(page.Sessions) != 2 {
		t.Fatalf("active = %d, %v", len(page.Sessions), err)
	}
	page, _ = e.m.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"team": "web"}})
	if len(page.Sessions) != 1 || page.Sessions[0].ID != a.ID || page.Sessions[0].Badge != berth.BadgeIdle {
		t.Fatalf("label filter = %+v", page.Sessions)
	}
	var seen []string
	cursor := ""
	for {
		page, err := e.m.ListSessions(ctx, berth.SessionFilter{Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sessions {
			seen = append(seen, s.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(seen, []string{c.ID, b.ID, a.ID}) {
		t.Fatalf("paged = %v, want newest first", seen)
	}
}

func TestDeleteRemovesLogAndManagedWorkspaceOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	managed := e.create(berth.CreateRequest{})
	userDir := t.TempDir()
	given := e.create(berth.CreateRequest{Workspace: userDir})
	e.prompt(given.ID, "write keep.txt precious")
	for _, s := range []*berth.Session{managed, given} {
		if err := e.m.DeleteSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.GetSession(ctx, s.ID); !berth.IsCode(err, berth.ENotFound) {
			t.Fatalf("get after delete = %v", err)
		}
		if _, err := e.store.ListEvents(ctx, s.ID, berth.EventFilter{}); err == nil {
			evs, _ := e.store.ListEvents(ctx, s.ID, berth.EventFilter{})
			if len(evs) > 0 {
				t.Fatalf("%d events left after delete", len(evs))
			}
		}
	}
	if live.WorkspaceExists(managed.Workspace) {
		t.Fatal("managed workspace left after delete")
	}
	if b, err := os.ReadFile(filepath.Join(userDir, "keep.txt")); err != nil || string(b) != "precious" {
		t.Fatalf("the user's workspace was touched: %q %v", b, err)
	}
}

// heldProvider is a provider whose probe answers only once release is
// closed (or its context ends).
type heldProvider struct {
	capsProvider
	release chan struct{}
}

func (p heldProvider) Probe(ctx context.Context) error {
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The sandbox providers are probed in the background (a bwrap trial run
// takes tens of milliseconds): the manager opens and answers its reads
// while a probe is held, health among them (naming the provider as
// probing), and what needs a provider's answer — a create — waits for it.
func TestReadsDoNotWaitForTheSandboxProbe(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	// A manager that waited for the probe in Open would open only then.
	safety := time.AfterFunc(3*time.Second, let)
	defer safety.Stop()
	t0 := time.Now()
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, heldProvider{capsProvider{name: "held"}, release})
	})
	ctx := context.Background()
	if _, err := e.m.ListSessions(ctx, berth.SessionFilter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Census(ctx); err != nil {
		t.Fatal(err)
	}
	// Liveness names the provider as being probed, and does not wait.
	if h, err := e.m.Health(ctx); err != nil || !slices.Contains(h.Probing, "held") || slices.Contains(h.Sandboxes, "held") {
		t.Fatalf("health while probing = %+v, %v: want held probing, not working", h, err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("the manager opened, listed and answered health after %v: it waited for the probe", took)
	}
	created := make(chan error, 1)
	go func() {
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
		created <- err
	}()
	select {
	case err := <-created:
		t.Fatalf("a create answered (%v) before the providers' probe did", err)
	case <-time.After(200 * time.Millisecond):
	}
	let()
	if err := <-created; err != nil {
		t.Fatalf("create once probed: %v", err)
	}
	h, err := e.m.Health(ctx)
	if err != nil || !slices.Contains(h.Sandboxes, "held") || len(h.Probing) != 0 {
		t.Fatalf("health once probed = %+v, %v: want the held provider working", h, err)
	}
}
