package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
)

// updates records session updates for the client tests.
type updates struct {
	recorder
	got []Update
}

func (u *updates) SessionUpdate(n SessionNotification, up Update) {
	u.mu.Lock()
	u.got = append(u.got, up.Clone())
	u.mu.Unlock()
}
func (u *updates) ExtNotification(method string, params json.RawMessage) {
	u.HandleNotification(method, params)
}
func (u *updates) RequestPermission(ctx context.Context, req RequestPermissionRequest) (RequestPermissionResponse, error) {
	return Selected(req.Options[0].OptionID), nil
}
func (u *updates) ReadTextFile(ctx context.Context, req ReadTextFileRequest) (ReadTextFileResponse, error) {
	return ReadTextFileResponse{Content: "content of " + req.Path}, nil
}
func (u *updates) WriteTextFile(ctx context.Context, req WriteTextFileRequest) error { return nil }
func (u *updates) CreateTerminal(ctx context.Context, req CreateTerminalRequest) (CreateTerminalResponse, error) {
	return CreateTerminalResponse{TerminalID: "t1"}, nil
}
func (u *updates) TerminalOutput(ctx context.Context, req TerminalRequest) (TerminalOutputResponse, error) {
	return TerminalOutputResponse{Output: "out"}, nil
}
func (u *updates) WaitForTerminalExit(ctx context.Context, req TerminalRequest) (TerminalExitStatus, error) {
	code := 0
	return TerminalExitStatus{ExitCode: &code}, nil
}
func (u *updates) KillTerminal(ctx context.Context, req TerminalRequest) error    { return nil }
func (u *updates) ReleaseTerminal(ctx context.Context, req TerminalRequest) error { return nil }

func TestClientKeepsUnknownUpdateKindsRaw(t *testing.T) {
	h := &updates{}
	c, p := newPair(t, clientDispatch{h}, Options{})
	_ = c
	p.send(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"hologram","beam":[1,2]}}}`)
	p.send(t, `{"jsonrpc":"2.0","method":"_auth/status_update","params":{"ok":true}}`)
	p.send(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`)
	waitFor(t, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.got) == 2 && len(h.methods) == 1 })
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got[0].Kind != "hologram" || h.got[0].Known() || string(h.got[0].Raw) != `{"sessionUpdate":"hologram","beam":[1,2]}` {
		t.Fatalf("unknown update = %+v raw %s", h.got[0], h.got[0].Raw)
	}
	if h.got[1].Text() != "hi" || !h.got[1].Known() {
		t.Fatalf("chunk = %+v", h.got[1])
	}
	if h.methods[0] != "_auth/status_update" {
		t.Fatalf("extension notification = %q", h.methods[0])
	}
}

func TestClientServesAgentRequests(t *testing.T) {
	h := &updates{}
	_, p := newPair(t, clientDispatch{h}, Options{})
	cases := []struct{ req, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/w/a"}}`, `{"content":"content of /w/a"}`},
		{`{"jsonrpc":"2.0","id":2,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/a","content":"x"}}`, `{}`},
		{`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}`, `{"outcome":{"outcome":"selected","optionId":"ok"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"terminal/create","params":{"sessionId":"s","command":"ls"}}`, `{"terminalId":"t1"}`},
		{`{"jsonrpc":"2.0","id":5,"method":"terminal/wait_for_exit","params":{"sessionId":"s","terminalId":"t1"}}`, `{"exitCode":0,"signal":null}`},
	}
	for _, tc := range cases {
		p.send(t, tc.req)
		m := p.readMsg(t)
		if string(m.Result) != tc.want {
			t.Fatalf("%s → %s (err %v), want %s", tc.req, m.Result, m.Error, tc.want)
		}
	}
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"no/such","params":{}}`)
	if m := p.readMsg(t); m.Error == nil || m.Error.Code != CodeMethodNotFound {
		t.Fatalf("unknown method answer = %+v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":[1]}`)
	if m := p.readMsg(t); m.Error == nil || m.Error.Code != CodeInvalidParams {
		t.Fatalf("bad params answer = %+v", m)
	}
}

// The initialize line a launcher hands the agent is the request Initialize
// sends first; a client made later takes its answer, already in the
// stream before the client reads, and numbers its own requests after it.
func TestTheInitializeHandedAheadIsTheOneInitializeSends(t *testing.T) {
	info := Implementation{Name: "berth", Version: "test"}
	line, err := InitializeLine(info)
	if err != nil {
		t.Fatal(err)
	}
	c, p := newPair(t, clientDispatch{&updates{}}, Options{})
	client := &Client{conn: c}
	go func() { _, _ = client.Initialize(context.Background(), info) }()
	sent := p.readMsg(t)
	var ahead message
	if err := json.Unmarshal(line, &ahead); err != nil || line[len(line)-1] != '\n' {
		t.Fatalf("InitializeLine = %q: %v", line, err)
	}
	if string(ahead.ID) != string(sent.ID) || ahead.Method != sent.Method || string(ahead.Params) != string(sent.Params) {
		t.Fatalf("handed ahead %q, Initialize sends id %s %s %s", line, sent.ID, sent.Method, sent.Params)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	later := NewClient(rwc{Reader: inR, WriteCloser: outW, closeR: inR.Close}, &updates{}, Options{})
	t.Cleanup(func() { inW.Close(); outR.Close(); later.Close() })
	wait, err := later.ExpectInitialize()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"}}}`+"\n")
	}()
	later.Start()
	res, err := wait(context.Background())
	if err != nil || res.ProtocolVersion != 1 || string(res.AgentInfo) != `{"name":"a","version":"1"}` {
		t.Fatalf("the answer taken: %+v, %v", res, err)
	}
	go func() { _, _ = later.NewSession(context.Background(), "/w", nil) }()
	next, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m message
	if err := json.Unmarshal(next, &m); err != nil || string(m.ID) != "2" || m.Method != MethodSessionNew {
		t.Fatalf("the next request %q, want id 2", next)
	}
}

// The session/new line a launcher hands the agent on its answer to
// initialize is the request NewSession sends next; a client made later
// takes both answers and numbers its own requests after them.
func TestTheSessionNewHandedAheadIsTheOneNewSessionSends(t *testing.T) {
	mcp := []McpServer{{Name: "berth", Command: "/bin/berth", Args: []string{"mcp"}, Env: []EnvVariable{}}}
	line, err := SessionNewLine("/w", mcp)
	if err != nil {
		t.Fatal(err)
	}
	c, p := newPair(t, clientDispatch{&updates{}}, Options{})
	client := &Client{conn: c}
	go func() {
		_, _ = client.Initialize(context.Background(), Implementation{Name: "berth"})
		_, _ = client.NewSession(context.Background(), "/w", mcp)
	}()
	p.readMsg(t)
	p.send(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	sent := p.readMsg(t)
	var ahead message
	if err := json.Unmarshal(line, &ahead); err != nil || line[len(line)-1] != '\n' {
		t.Fatalf("SessionNewLine = %q: %v", line, err)
	}
	if string(ahead.ID) != string(sent.ID) || ahead.Method != sent.Method || string(ahead.Params) != string(sent.Params) {
		t.Fatalf("handed ahead %q, NewSession sends id %s %s %s", line, sent.ID, sent.Method, sent.Params)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	later := NewClient(rwc{Reader: inR, WriteCloser: outW, closeR: inR.Close}, &updates{}, Options{})
	t.Cleanup(func() { inW.Close(); outR.Close(); later.Close() })
	waitInit, err := later.ExpectInitialize()
	if err != nil {
		t.Fatal(err)
	}
	waitNew, err := later.ExpectNewSession()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s-1"}}`+"\n")
	}()
	later.Start()
	if res, err := waitInit(context.Background()); err != nil || res.ProtocolVersion != 1 {
		t.Fatalf("initialize's answer: %+v, %v", res, err)
	}
	if res, err := waitNew(context.Background()); err != nil || res.SessionID != "s-1" {
		t.Fatalf("session/new's answer: %+v, %v", res, err)
	}
	go func() { _, _ = later.Prompt(context.Background(), "s-1") }()
	next, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m message
	if err := json.Unmarshal(next, &m); err != nil || string(m.ID) != "3" || m.Method != MethodSessionPrompt {
		t.Fatalf("the next request %q, want id 3", next)
	}
}

// Succeeded tells a result from an error.
func TestSucceeded(t *testing.T) {
	for line, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                           true,
		`{"jsonrpc":"2.0","id":1,"result":null,"error":null}`:            true,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`: false,
		`{"jsonrpc":"2.0","id":1}`:                                       false,
		`not json`:                                                       false,
	} {
		if got := Succeeded([]byte(line)); got != want {
			t.Errorf("Succeeded(%s) = %v, want %v", line, got, want)
		}
	}
}
