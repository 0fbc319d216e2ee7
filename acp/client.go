package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ClientHandler is what berth serves to an agent. Every method but
// SessionUpdate and ExtNotification runs on its own goroutine, so a request
// that waits (a permission question) never blocks the agent's updates.
type ClientHandler interface {
	// SessionUpdate receives each session/update in arrival order, on the
	// reader goroutine, including updates that arrive before session/new
	// answers or after a prompt answers. It must not call the agent. u's
	// RawText is valid only during the call: keep u.Clone().
	SessionUpdate(n SessionNotification, u Update)
	// ExtNotification receives any other notification (e.g. "_…" extensions).
	ExtNotification(method string, params json.RawMessage)
	RequestPermission(ctx context.Context, req RequestPermissionRequest) (RequestPermissionResponse, error)
	ReadTextFile(ctx context.Context, req ReadTextFileRequest) (ReadTextFileResponse, error)
	WriteTextFile(ctx context.Context, req WriteTextFileRequest) error
	CreateTerminal(ctx context.Context, req CreateTerminalRequest) (CreateTerminalResponse, error)
	TerminalOutput(ctx context.Context, req TerminalRequest) (TerminalOutputResponse, error)
	WaitForTerminalExit(ctx context.Context, req TerminalRequest) (TerminalExitStatus, error)
	KillTerminal(ctx context.Context, req TerminalRequest) error
	ReleaseTerminal(ctx context.Context, req TerminalRequest) error
}

// Client is the client side of an ACP connection: berth talking to one agent.
type Client struct {
	conn *Conn
	h    ClientHandler
}

// NewClient returns a client over rwc serving h; call Start to begin.
func NewClient(rwc io.ReadWriteCloser, h ClientHandler, opts Options) *Client {
	c := &Client{h: h}
	c.conn = NewConn(rwc, clientDispatch{h}, opts)
	return c
}

// Start starts reading from the agent.
func (c *Client) Start() { c.conn.Start() }

// Done is closed when the agent's output ends.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err says why the agent's output ended (nil for EOF).
func (c *Client) Err() error { return c.conn.Err() }

// Stats returns the transport's counters.
func (c *Client) Stats() Stats { return c.conn.Stats() }

// Close closes the transport and waits for every handler to return.
func (c *Client) Close() error { return c.conn.Close() }

// Initialize opens the protocol, advertising fs read/write, terminals and
// elicitations in both modes.
func (c *Client) Initialize(ctx context.Context, info Implementation) (InitializeResponse, error) {
	var resp InitializeResponse
	err := c.conn.Call(ctx, MethodInitialize, initializeRequest(info), &resp)
	return resp, err
}

// initializeRequest is what a client says of itself as it opens the protocol.
func initializeRequest(info Implementation) InitializeRequest {
	return InitializeRequest{
		ProtocolVersion: ProtocolVersion,
		ClientCapabilities: ClientCapabilities{Fs: FsCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true,
			Elicitation: bothModes},
		ClientInfo: &info,
	}
}

// earlyInitializeID and earlySessionNewID are the ids of the requests
// InitializeLine and SessionNewLine encode: the first two a new connection
// would give.
const (
	earlyInitializeID = 1
	earlySessionNewID = 2
)

// InitializeLine is the initialize request Initialize would send first on
// a new connection, as one line, for a launcher to hand the agent as it
// starts; a client made over that agent's stream takes the answer with
// ExpectInitialize instead of sending its own.
func InitializeLine(info Implementation) ([]byte, error) {
	return requestLine(earlyInitializeID, MethodInitialize, initializeRequest(info))
}

// SessionNewLine is the session/new request NewSession would send next,
// right after InitializeLine's, as one line: for a launcher to hand the
// agent the moment it has answered initialize, a hop sooner than the
// client could. A client made over that agent's stream takes the answer
// with ExpectNewSession.
func SessionNewLine(cwd string, mcp []McpServer) ([]byte, error) {
	return requestLine(earlySessionNewID, MethodSessionNew, NewSessionRequest{Cwd: cwd, McpServers: orEmpty(mcp)})
}

// requestLine encodes one request as a line.
func requestLine(id int64, method string, params any) ([]byte, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("acp: encode %s: %w", method, err)
	}
	b, err := json.Marshal(&message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: raw})
	if err != nil {
		return nil, fmt.Errorf("acp: encode %s: %w", method, err)
	}
	return append(b, '\n'), nil
}

// ExpectInitialize registers the request InitializeLine encoded, which
// the agent was handed before this client existed, as sent; wait returns
// its answer. Call it before Start, or an answer already read finds
// nobody waiting.
func (c *Client) ExpectInitialize() (wait func(ctx context.Context) (InitializeResponse, error), err error) {
	return expect[InitializeResponse](c.conn, earlyInitializeID, MethodInitialize, nil)
}

// ExpectNewSession is ExpectInitialize for the request SessionNewLine
// encoded, handed to the agent once it answered initialize.
func (c *Client) ExpectNewSession() (wait func(ctx context.Context) (NewSessionResponse, error), err error) {
	return expect[NewSessionResponse](c.conn, earlySessionNewID, MethodSessionNew, nil)
}

// expect is Conn.Expect with the answer decoded as a T.
func expect[T any](c *Conn, id int64, method string, then func(json.RawMessage, *Error)) (func(context.Context) (T, error), error) {
	wait, err := c.Expect(id, method, then)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (T, error) {
		var resp T
		err := wait(ctx, &resp)
		return resp, err
	}, nil
}

// NewSession creates an ACP session working in cwd, given the MCP servers mcp.
func (c *Client) NewSession(ctx context.Context, cwd string, mcp []McpServer) (NewSessionResponse, error) {
	var resp NewSessionResponse
	err := c.conn.Call(ctx, MethodSessionNew, NewSessionRequest{Cwd: cwd, McpServers: orEmpty(mcp)}, &resp)
	return resp, err
}

// Authenticate runs ACP authenticate with the method methodID.
func (c *Client) Authenticate(ctx context.Context, methodID string) error {
	return c.conn.Call(ctx, MethodAuthenticate, AuthenticateRequest{MethodID: methodID}, nil)
}

// LoadSession reopens a stored ACP session, given the MCP servers mcp; the
// agent replays its history as session/update notifications before it
// answers.
func (c *Client) LoadSession(ctx context.Context, sessionID, cwd string, mcp []McpServer) error {
	return c.conn.Call(ctx, MethodSessionLoad, LoadSessionRequest{SessionID: sessionID, Cwd: cwd, McpServers: orEmpty(mcp)}, nil)
}

// ResumeSession resumes an ACP session without a replay, given the MCP
// servers mcp.
func (c *Client) ResumeSession(ctx context.Context, sessionID, cwd string, mcp []McpServer) error {
	return c.conn.Call(ctx, MethodSessionResume, LoadSessionRequest{SessionID: sessionID, Cwd: cwd, McpServers: orEmpty(mcp)}, nil)
}

// Prompt runs one turn and returns its stop reason. Every update the agent
// sent before its answer has been handed to SessionUpdate when it returns.
func (c *Client) Prompt(ctx context.Context, sessionID string, prompt ...ContentBlock) (PromptResponse, error) {
	var resp PromptResponse
	err := c.conn.Call(ctx, MethodSessionPrompt, PromptRequest{SessionID: sessionID, Prompt: prompt}, &resp)
	return resp, err
}

// PromptThen is Prompt whose answered runs on the reader goroutine the
// moment the agent answers (with the answer, or its JSON-RPC error), before
// any later update is handled: updates sent after the answer are never
// taken for part of the turn. answered does not run when the connection
// ends first.
func (c *Client) PromptThen(ctx context.Context, sessionID string, answered func(PromptResponse, error), prompt ...ContentBlock) (PromptResponse, error) {
	var resp PromptResponse
	err := c.conn.CallThen(ctx, MethodSessionPrompt, PromptRequest{SessionID: sessionID, Prompt: prompt}, &resp, promptThen(answered))
	return resp, err
}

// promptThen decodes a prompt's answer for answered.
func promptThen(answered func(PromptResponse, error)) func(json.RawMessage, *Error) {
	return func(result json.RawMessage, rpcErr *Error) {
		var r PromptResponse
		var err error
		if rpcErr != nil {
			err = rpcErr
		} else if len(result) > 0 {
			if uerr := json.Unmarshal(result, &r); uerr != nil {
				err = &Error{Code: CodeInternal, Message: "the agent's prompt answer does not decode: " + uerr.Error()}
			}
		}
		answered(r, err)
	}
}

// ExpectPrompt takes over a session/prompt request with id that an earlier
// connection sent, as PromptThen would have (see Conn.Expect). Call it
// before Start.
func (c *Client) ExpectPrompt(id int64, answered func(PromptResponse, error)) (func(context.Context) (PromptResponse, error), error) {
	return expect[PromptResponse](c.conn, id, MethodSessionPrompt, promptThen(answered))
}

// MaxLineBytes is the cap on one inbound line.
func (c *Client) MaxLineBytes() int { return c.conn.opts.MaxLineBytes }

// Position is Conn.Position.
func (c *Client) Position() int64 { return c.conn.Position() }

// AnsweredTo is Conn.AnsweredTo.
func (c *Client) AnsweredTo() int64 { return c.conn.AnsweredTo() }

// Redeliver is Conn.Redeliver.
func (c *Client) Redeliver(line []byte) { c.conn.Redeliver(line) }

// Cancel asks the agent to end the turn in flight.
func (c *Client) Cancel(ctx context.Context, sessionID string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.conn.Notify(ctx, MethodSessionCancel, CancelNotification{SessionID: sessionID})
}

// clientDispatch routes the agent's messages to a ClientHandler.
type clientDispatch struct{ h ClientHandler }

// HandleNotification implements Handler.
func (d clientDispatch) HandleNotification(method string, params json.RawMessage) {
	d.notification(method, params, false)
}

// HandleOwnedNotification implements lineTaker: a text chunk's update may
// build its event data in the line's own buffer.
func (d clientDispatch) HandleOwnedNotification(method string, params json.RawMessage) {
	d.notification(method, params, true)
}

// notification serves one notification; owned says params may be kept
// and overwritten.
func (d clientDispatch) notification(method string, params json.RawMessage, owned bool) {
	if method != MethodSessionUpdate {
		if json.Valid(params) {
			d.h.ExtNotification(method, bytes.Clone(params))
		}
		return
	}
	// The hot path (text chunks) decodes nothing: the handler gets the
	// text as written, to store or decode as it needs.
	if sid, kind, raw, ok := scanTextChunk(params); ok {
		at := offsetIn(params, raw)
		d.h.SessionUpdate(SessionNotification{SessionID: sid},
			Update{Kind: kind, rawText: raw, params: params, at: at, owned: owned && at >= 0})
		return
	}
	{
		var n SessionNotification
		if err := json.Unmarshal(params, &n); err != nil || len(n.Update) == 0 {
			// Keep what cannot be decoded (but is JSON) as an unknown update.
			if json.Valid(params) {
				raw := bytes.Clone(params)
				d.h.SessionUpdate(SessionNotification{Update: raw}, Update{Raw: raw})
			}
			return
		}
		d.h.SessionUpdate(n, ParseUpdate(n.Update))
	}
}

// decode unmarshals params into v, or returns an invalid-params error.
func decode[T any](params json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(params, &v); err != nil {
		return v, InvalidParams(err)
	}
	return v, nil
}

// empty is the {} result of methods that return nothing.
type empty struct{}

// HandleRequest implements Handler.
func (d clientDispatch) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case MethodRequestPermission:
		req, err := decode[RequestPermissionRequest](params)
		if err != nil {
			return nil, err
		}
		return d.h.RequestPermission(ctx, req)
	case MethodElicitationCreate:
		eh, ok := d.h.(ElicitationHandler)
		if !ok {
			return nil, MethodNotFound(method)
		}
		req, err := decode[CreateElicitationRequest](params)
		if err != nil {
			return nil, err
		}
		return eh.CreateElicitation(ctx, req)
	case MethodReadTextFile:
		req, err := decode[ReadTextFileRequest](params)
		if err != nil {
			return nil, err
		}
		return d.h.ReadTextFile(ctx, req)
	case MethodWriteTextFile:
		req, err := decode[WriteTextFileRequest](params)
		if err != nil {
			return nil, err
		}
		return empty{}, d.h.WriteTextFile(ctx, req)
	case MethodTerminalCreate:
		req, err := decode[CreateTerminalRequest](params)
		if err != nil {
			return nil, err
		}
		return d.h.CreateTerminal(ctx, req)
	case MethodTerminalOutput, MethodTerminalWait, MethodTerminalKill, MethodTerminalRelease:
		req, err := decode[TerminalRequest](params)
		if err != nil {
			return nil, err
		}
		switch method {
		case MethodTerminalOutput:
			return d.h.TerminalOutput(ctx, req)
		case MethodTerminalWait:
			return d.h.WaitForTerminalExit(ctx, req)
		case MethodTerminalKill:
			return empty{}, d.h.KillTerminal(ctx, req)
		default:
			return empty{}, d.h.ReleaseTerminal(ctx, req)
		}
	}
	return nil, MethodNotFound(method)
}

// Pipe joins a reader and a writer (a child's stdout and stdin) into one
// io.ReadWriteCloser whose Close closes both.
type Pipe struct {
	R io.ReadCloser
	W io.WriteCloser
}

// Read implements io.Reader.
func (p Pipe) Read(b []byte) (int, error) { return p.R.Read(b) }

// Write implements io.Writer.
func (p Pipe) Write(b []byte) (int, error) { return p.W.Write(b) }

// SetWriteDeadline forwards to the writer when it supports deadlines.
func (p Pipe) SetWriteDeadline(t time.Time) error {
	if d, ok := p.W.(deadliner); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}

// Close closes the writer, then the reader.
func (p Pipe) Close() error {
	werr := p.W.Close()
	rerr := p.R.Close()
	if werr != nil {
		return werr
	}
	return rerr
}
