package demoagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Agent identity reported by initialize.
const (
	agentName    = "berth-demo"
	agentVersion = "1"
)

// codeResourceNotFound is ACP's JSON-RPC error code for an unknown resource
// (here: a session id that session/load or session/prompt does not know).
const codeResourceNotFound = -32002

var errShuttingDown = errors.New("demo agent is shutting down")

// agent implements acp.Agent and acp.AgentLoader.
type agent struct {
	conn     *acp.AgentSideConnection
	out      *gatedWriter
	stderr   io.Writer
	stateDir string
	// noLoad hides session/load: the agent cannot reopen a conversation.
	noLoad  bool
	exit    func(int)
	release <-chan struct{}

	// noMCPHTTP hides MCP over HTTP: only stdio servers are offered.
	noMCPHTTP bool
	// noControls hides modes, config options and commands (controls.go).
	noControls bool
	// requireAuth makes session/new and session/prompt answer
	// auth_required until authenticate (demo-login) succeeds; authed says
	// it has (guarded by mu).
	requireAuth bool
	authed      bool
	// failNew makes session/new fail (an agent that cannot start).
	failNew bool
	// noFork hides session/fork (fork.go).
	noFork bool

	hung     chan struct{}
	hungOnce sync.Once

	mu         sync.Mutex
	sessions   map[string]*session
	clientCaps acp.ClientCapabilities
	closed     bool
	inflight   sync.WaitGroup

	toolSeq atomic.Uint64
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

// session is one conversation the agent knows in this process.
type session struct {
	id  string
	log *historyLog

	// turnMu serializes turns and history replays of the session.
	turnMu sync.Mutex

	mu  sync.Mutex
	cwd string
	// mcp are the MCP servers the client gave in session/new or session/load.
	mcp []acp.McpServer
	// ctl are the session's mode, model and verbosity (zero: the defaults).
	ctl controls
}

func (s *session) getCwd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}

func (s *session) setCwd(cwd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cwd = cwd
}

func newAgent(stateDir string, stdout, stderr io.Writer, release <-chan struct{}) *agent {
	hung := make(chan struct{})
	return &agent{
		out:      &gatedWriter{w: stdout, hung: hung, release: release},
		stderr:   stderr,
		stateDir: stateDir,
		exit:     exit,
		release:  release,
		hung:     hung,
		sessions: make(map[string]*session),
	}
}

// enter registers an in-flight handler; leave must follow when it returns
// nil. It blocks while the agent is hung.
func (a *agent) enter() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errShuttingDown
	}
	a.inflight.Add(1)
	a.mu.Unlock()
	if err := a.waitIfHung(); err != nil {
		a.inflight.Done()
		return err
	}
	return nil
}

func (a *agent) leave() { a.inflight.Done() }

// shutdown waits for in-flight handlers and closes the history files.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.inflight.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		if err := s.log.close(); err != nil {
			fmt.Fprintf(a.stderr, "agent-demo: closing history of %s: %v\n", s.id, err)
		}
	}
}

// setHung makes the agent stop answering anything.
func (a *agent) setHung() { a.hungOnce.Do(func() { close(a.hung) }) }

// waitRelease blocks until release is closed; a nil release (a real agent
// process) blocks forever. It sleeps rather than waiting on a nil channel so
// the Go runtime never takes a hung agent whose stdin closed for a deadlock
// and exits it.
func waitRelease(release <-chan struct{}) {
	if release != nil {
		<-release
		return
	}
	for {
		time.Sleep(time.Hour)
	}
}

// waitIfHung blocks forever (until release, in tests) once the agent is hung.
func (a *agent) waitIfHung() error {
	select {
	case <-a.hung:
		waitRelease(a.release)
		return errHung
	default:
		return nil
	}
}

func (a *agent) caps() acp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clientCaps
}

func (a *agent) nextToolCallID() acp.ToolCallId {
	return acp.ToolCallId(fmt.Sprintf("call-%d", a.toolSeq.Add(1)))
}

// lookup finds a session known to this process.
func (a *agent) lookup(id acp.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[string(id)]
	if s == nil {
		return nil, sessionNotFound(string(id))
	}
	return s, nil
}

func sessionNotFound(id string) *acp.RequestError {
	return &acp.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]any{"sessionId": id}}
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return acp.NewInvalidParams(map[string]any{"error": "cwd must be an absolute path"})
	}
	return nil
}

// Initialize implements acp.Agent.
func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	if err := a.enter(); err != nil {
		return acp.InitializeResponse{}, err
	}
	defer a.leave()
	a.mu.Lock()
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: !a.noLoad,
			// stdio is always offered; HTTP too, SSE not (docs/api.md, "User
			// MCP servers").
			McpCapabilities:     acp.McpCapabilities{Http: !a.noMCPHTTP},
			PromptCapabilities:  promptCapabilities,
			SessionCapabilities: acp.SessionCapabilities{Fork: a.forkCapability()},
		},
		AgentInfo:   &acp.Implementation{Name: agentName, Version: agentVersion},
		AuthMethods: a.authMethods(),
	}, nil
}

// NewSession implements acp.Agent.
func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if err := a.enter(); err != nil {
		return acp.NewSessionResponse{}, err
	}
	defer a.leave()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.NewSessionResponse{}, err
	}
	if a.failNew {
		return acp.NewSessionResponse{}, &acp.RequestError{Code: -32603, Message: "Internal error",
			Data: map[string]any{"cause": "Connection error"}}
	}
	if err := a.authRequired("not logged in"); err != nil {
		return acp.NewSessionResponse{}, err
	}
	id, log, err := a.newHistory(p.Cwd)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[id] = &session{id: id, log: log, cwd: p.Cwd, mcp: p.McpServers}
	a.mu.Unlock()
	if err := a.sendCommands(ctx, id); err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(id), Modes: a.modeState(defaultControls),
		ConfigOptions: a.configOptions(defaultControls)}, nil
}

// newHistory makes a session id and the history of that session in cwd.
func (a *agent) newHistory(cwd string) (string, *historyLog, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := "demo-" + hex.EncodeToString(b[:])
	log, err := createHistory(a.stateDir, id, cwd)
	return id, log, err
}

// LoadSession implements acp.AgentLoader: it replays the stored conversation
// as session/update notifications, then answers.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if err := a.enter(); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	defer a.leave()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	id := string(p.SessionId)
	s, err := a.lookup(p.SessionId)
	if err != nil {
		hl, err := openHistory(a.stateDir, id)
		if errors.Is(err, errNoHistory) {
			return acp.LoadSessionResponse{}, sessionNotFound(id)
		}
		if err != nil {
			return acp.LoadSessionResponse{}, err
		}
		a.mu.Lock()
		// Another load of the same id may have won the race.
		if s = a.sessions[id]; s == nil {
			s = &session{id: id, log: hl}
			a.sessions[id] = s
			hl = nil
		}
		a.mu.Unlock()
		if hl != nil {
			_ = hl.close()
		}
	}

	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	s.setCwd(p.Cwd)
	s.setMCP(p.McpServers)
	rp := &replayer{a: a, ctx: ctx, sid: s.id}
	err = s.log.replay(func(r record) error {
		if r.Type == recControls {
			s.restoreControls(r)
		}
		return rp.add(r)
	})
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if err := rp.flush(); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if err := a.sendCommands(ctx, s.id); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	c := s.getControls()
	return acp.LoadSessionResponse{Modes: a.modeState(c), ConfigOptions: a.configOptions(c)}, nil
}

// Prompt implements acp.Agent: it runs the prompt's lines as commands.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	if err := a.enter(); err != nil {
		return acp.PromptResponse{}, err
	}
	defer a.leave()
	s, err := a.lookup(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if err := a.authRequired("the demo login expired"); err != nil {
		return acp.PromptResponse{}, err
	}
	// A newer prompt on the same session cancels this one's ctx (the SDK does
	// that), so waiting here is short.
	s.turnMu.Lock()
	defer s.turnMu.Unlock()

	text := promptText(p.Prompt)
	t := &turn{a: a, s: s, ctx: ctx, nctx: context.WithoutCancel(ctx), cwd: s.getCwd()}
	t.record(record{Type: recUser, Text: text})
	if err := t.answerContent(p.Prompt); err != nil {
		return acp.PromptResponse{}, err
	}
	reason, err := t.run(text)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: reason}, nil
}

// promptText joins the text blocks of a prompt; other blocks are ignored.
func promptText(blocks []acp.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		if c.Text != nil {
			b.WriteString(c.Text.Text)
		}
	}
	return b.String()
}

// Cancel implements acp.Agent. The SDK already cancelled the context of the
// session's prompt in flight; there is nothing else to stop.
func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

// update sends one session/update notification.
func (a *agent) update(ctx context.Context, sid string, u acp.SessionUpdate) error {
	return a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u})
}

// sendRepeated sends the same session/update n times and says how many were
// sent. The notification is encoded once and written as raw lines through
// the agent's stdout lock, so a flood costs no allocation per chunk (the SDK
// re-marshals every update through a map). It stops early when ctx ends.
func (a *agent) sendRepeated(ctx context.Context, sid string, u acp.SessionUpdate, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	line, err := json.Marshal(struct {
		JSONRPC string                  `json:"jsonrpc"`
		Method  string                  `json:"method"`
		Params  acp.SessionNotification `json:"params"`
	}{"2.0", acp.ClientMethodSessionUpdate, acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u}})
	if err != nil {
		return 0, err
	}
	line = append(line, '\n')
	for i := range n {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if _, err := a.out.Write(line); err != nil {
			return i, err
		}
	}
	return n, nil
}

// Logout implements acp.Agent (unsupported).
func (a *agent) Logout(ctx context.Context, p acp.LogoutRequest) (acp.LogoutResponse, error) {
	return acp.LogoutResponse{}, acp.NewMethodNotFound(acp.AgentMethodLogout)
}

// CloseSession implements acp.Agent (unsupported).
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

// ListSessions implements acp.Agent (unsupported).
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

// ResumeSession implements acp.Agent (unsupported: use session/load).
func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}
