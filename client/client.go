package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// maxErrorBody is how much of an error answer the client reads.
const maxErrorBody = 1 << 20

// DefaultAddr is where a daemon listens on TCP unless configured otherwise.
const DefaultAddr = "127.0.0.1:7380"

// SocketName is the daemon's Unix socket inside its home directory.
const SocketName = "berth.sock"

// TokenFile is the file in the home directory where a daemon keeps the
// bearer token it generated for its TCP clients.
const TokenFile = "token"

// Client talks to a berth daemon over HTTP, on TCP or its Unix socket. It
// implements berth.SessionService, as the daemon's session manager does, so
// code written against that interface drives a remote daemon or one in the
// same process alike. Every error it returns carries a berth code: the
// daemon's own errors decode into *berth.Error with their code, message and
// details (errors.Is and berth.ErrorCode work as they do on the manager's);
// a daemon that does not answer is EUnavailable. It is safe for concurrent
// use.
type Client struct {
	baseURL string
	token   string
	// target names the daemon in messages: a URL or a socket path.
	target string
	hc     *http.Client

	// reconnectDelay is the first pause before a stream reconnects; it
	// doubles up to maxReconnectDelay.
	reconnectDelay    time.Duration
	maxReconnectDelay time.Duration
	// maxReconnects is how many reconnections in a row may fail before a
	// stream gives up.
	maxReconnects int
}

var _ berth.SessionService = (*Client)(nil)

// settings collect what the options say before New builds the client.
type settings struct {
	token    string
	hasToken bool
	home     string
	// reconnect* override the stream's reconnection policy when > 0.
	reconnectDelay, maxReconnectDelay time.Duration
	maxReconnects                     int
	transport                         http.RoundTripper
}

// An Option configures a Client.
type Option func(*settings)

// WithToken sets the bearer token sent with every request (over the Unix
// socket too). Without it a TCP client sends the token the daemon keeps in
// its home directory (see WithHome), and a socket client sends none.
func WithToken(token string) Option {
	return func(s *settings) { s.token, s.hasToken = token, true }
}

// WithHome names the berth home directory whose token file (and, for an
// empty address, socket) the client uses; the default is $BERTH_HOME, else
// ~/.berth.
func WithHome(dir string) Option { return func(s *settings) { s.home = dir } }

// WithReconnect sets how a stream reconnects after a dropped connection:
// it first waits delay, doubling up to maxDelay, and gives up after
// attempts failures in a row. The defaults are 200ms, 5s and 8.
func WithReconnect(delay, maxDelay time.Duration, attempts int) Option {
	return func(s *settings) { s.reconnectDelay, s.maxReconnectDelay, s.maxReconnects = delay, maxDelay, attempts }
}

// WithTransport sets the HTTP transport of a TCP client (TLS settings, a
// proxy, instrumentation). A socket client always dials its socket.
func WithTransport(rt http.RoundTripper) Option { return func(s *settings) { s.transport = rt } }

// New returns a client of the daemon at addr: "host:port" or
// "http(s)://host:port" for TCP, "unix:PATH" (or an absolute PATH) for its
// Unix socket, or "" for the daemon of the home directory (its socket when
// there is one, else 127.0.0.1:7380). Without WithToken, a client of a
// loopback address sends the token in the home directory. A bad address is
// EInvalid; New does not connect.
func New(addr string, opts ...Option) (*Client, error) {
	var st settings
	for _, o := range opts {
		o(&st)
	}
	home := st.home
	if home == "" {
		home = DefaultHome()
	}
	if addr == "" {
		sock := filepath.Join(home, SocketName)
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			addr = "unix:" + sock
		} else {
			addr = DefaultAddr
		}
	}
	var c *Client
	switch path, isUnix := strings.CutPrefix(addr, "unix:"); {
	case isUnix || strings.HasPrefix(addr, "/"):
		if path == "" {
			return nil, berth.Errorf(berth.EInvalid, "address unix: names no socket")
		}
		c = newUnixClient(path, st.token)
	default:
		baseURL := addr
		if !strings.Contains(baseURL, "://") {
			baseURL = "http://" + baseURL
		}
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, berth.Errorf(berth.EInvalid, "bad daemon address %q: want host:port, http://host:port or unix:PATH", addr)
		}
		token := st.token
		if !st.hasToken && home != "" && isLoopback(u.Hostname()) {
			// The home's token is for its own daemon, which listens on
			// loopback (a daemon elsewhere has a configured token).
			token = ReadToken(home)
		}
		c = newTCPClient(baseURL, token, st.transport)
	}
	if st.reconnectDelay > 0 {
		c.reconnectDelay = st.reconnectDelay
	}
	if st.maxReconnectDelay > 0 {
		c.maxReconnectDelay = st.maxReconnectDelay
	}
	if st.maxReconnects > 0 {
		c.maxReconnects = st.maxReconnects
	}
	return c, nil
}

// DefaultHome returns the berth home directory of this user: $BERTH_HOME,
// else ~/.berth ("" when neither can be found).
func DefaultHome() string {
	if h := os.Getenv("BERTH_HOME"); h != "" {
		return h
	}
	user, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(user, ".berth")
}

// ReadToken returns the token a daemon keeps in the home directory home
// for its TCP clients, or "" when there is none.
func ReadToken(home string) string {
	b, err := os.ReadFile(filepath.Join(home, TokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// isLoopback reports whether host names this machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newTCPClient returns a client for the daemon at baseURL
// ("http://127.0.0.1:7380"). token, when not empty, is sent as a bearer
// token.
func newTCPClient(baseURL, token string, rt http.RoundTripper) *Client {
	baseURL = strings.TrimRight(baseURL, "/")
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	return newClient(baseURL, token, baseURL, rt)
}

// newUnixClient returns a client for the daemon listening on the Unix
// socket at socketPath.
func newUnixClient(socketPath string, token string) *Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socketPath)
	}
	// The host is a placeholder: the transport always dials the socket.
	return newClient("http://berth", token, socketPath, transport)
}

// newClient builds a client over transport.
func newClient(baseURL, token, target string, transport http.RoundTripper) *Client {
	return &Client{
		baseURL:           baseURL,
		token:             token,
		target:            target,
		hc:                &http.Client{Transport: transport},
		reconnectDelay:    200 * time.Millisecond,
		maxReconnectDelay: 5 * time.Second,
		maxReconnects:     8,
	}
}

// Target returns where the client connects: the base URL or the socket path.
func (c *Client) Target() string { return c.target }

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Do sends one API request: in, when not nil, is the JSON body; out, when
// not nil, receives the JSON answer (a *json.RawMessage keeps it verbatim).
// path is the API path ("/v1/sessions"); query may be nil. An error answer
// becomes a *berth.Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.send(ctx, method, path, query, in, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		// Drain so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return berth.WrapError(berth.EInternal, err, "the daemon's answer to %s %s is not valid JSON", method, path)
	}
	return nil
}

// call sends one API request (see Do) and returns its JSON answer decoded
// into a new T: a route's method is one line, e.g.
//
//	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/stop"), nil, nil)
func call[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any) (*T, error) {
	var out T
	if err := c.Do(ctx, method, path, query, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// send sends a request and returns the response when its status is 2xx;
// otherwise it closes the body and returns the decoded error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any, header http.Header) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			return nil, berth.WrapError(berth.EInvalid, err, "cannot encode the request")
		}
		body = &buf
	}
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "bad request %s %s", method, path)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		err := decodeErrorResponse(resp)
		var be *berth.Error
		if resp.StatusCode == http.StatusUnauthorized && errors.As(err, &be) && be.Err == nil {
			be.Err = &Unauthorized{TokenSent: c.token != ""}
		}
		return nil, err
	}
	return resp, nil
}

// Unauthorized is the cause a 401 answer's *berth.Error carries, so that a
// program can say in its own words which token to give: whether this
// client sent one (refused) or none.
type Unauthorized struct {
	TokenSent bool
}

// Error implements error.
func (u *Unauthorized) Error() string {
	if u.TokenSent {
		return "the daemon refused the token"
	}
	return "the daemon wants a token"
}

// transportError classifies an error of the transport: the caller's own
// cancellation stays as it is; anything else means the daemon cannot be
// reached (EUnavailable).
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return berth.WrapError(berth.EUnavailable, err, "no berth daemon answers at %s (start one with `berth serve`)", c.target)
	}
	return berth.WrapError(berth.EUnavailable, err, "cannot reach the berth daemon at %s: %v", c.target, err)
}

// decodeErrorResponse turns an error answer into a *berth.Error: the API's
// error JSON when there is one, else a code guessed from the status.
func decodeErrorResponse(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body errorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		e := &berth.Error{Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details}
		if len(e.Details) == 0 {
			e.Details = nil
		}
		return e
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return berth.Errorf(codeForStatus(resp.StatusCode), "the daemon answered %d: %s", resp.StatusCode, msg)
}

// sessionPath returns the API path of a session, with suffix appended.
func sessionPath(id, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(id) + suffix
}

// Health returns the daemon's health.
func (c *Client) Health(ctx context.Context) (*berth.Health, error) {
	return call[berth.Health](ctx, c, http.MethodGet, "/v1/health", nil, nil)
}

// Agents returns the agent catalog.
func (c *Client) Agents(ctx context.Context) ([]berth.AgentInfo, error) {
	var out agentList
	if err := c.Do(ctx, http.MethodGet, "/v1/agents", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Agents, nil
}

// InstallAgent fetches the npx agent name's package ahead into the
// daemon's npm prefix (POST /v1/agents/{name}/install).
func (c *Client) InstallAgent(ctx context.Context, name string) (berth.AgentInfo, error) {
	var out berth.AgentInfo
	err := c.Do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(name)+"/install", nil, nil, &out)
	return out, err
}

// CreateSession creates a session; the agent's handshake is done when it
// returns. A session whose agent failed to start comes back stopped with
// its failure, not as an error.
func (c *Client) CreateSession(ctx context.Context, req berth.CreateRequest) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, "/v1/sessions", nil, req)
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodGet, sessionPath(id, ""), nil, nil)
}

// SessionQuery returns the query string of GET /v1/sessions for f.
func SessionQuery(f berth.SessionFilter) url.Values {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Agent != "" {
		q.Set("agent", f.Agent)
	}
	if f.Parent != "" {
		q.Set("parent", f.Parent)
	}
	if f.Root != "" {
		q.Set("root", f.Root)
	}
	for k, v := range f.Labels {
		q.Add("label", k+"="+v)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	return q
}

// ListSessions returns one page of sessions; pass the page's NextCursor as
// f.Cursor for the next one.
func (c *Client) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	return call[berth.SessionPage](ctx, c, http.MethodGet, "/v1/sessions", SessionQuery(f), nil)
}

// StopSession stops a session and returns it stopped.
func (c *Client) StopSession(ctx context.Context, id string) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/stop"), nil, nil)
}

// DeleteSession stops a session and deletes its log and managed workspace.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, sessionPath(id, ""), nil, nil, nil)
}

// Prompt sends a prompt and returns at once: the turn started, or the entry
// queued or staged.
func (c *Client) Prompt(ctx context.Context, id string, req berth.PromptRequest) (*berth.PromptResult, error) {
	return call[berth.PromptResult](ctx, c, http.MethodPost, sessionPath(id, "/prompts"), nil, req)
}

// PromptWait sends a prompt with ?wait=true and returns when its turn ends,
// with the turn's stop reason and text.
func (c *Client) PromptWait(ctx context.Context, id string, req berth.PromptRequest) (*berth.TurnResult, error) {
	q := url.Values{"wait": {"true"}}
	return call[berth.TurnResult](ctx, c, http.MethodPost, sessionPath(id, "/prompts"), q, req)
}

// Cancel cancels the turn in flight and returns its id (EConflict when the
// session is idle).
func (c *Client) Cancel(ctx context.Context, id string) (string, error) {
	var res cancelResult
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "/cancel"), nil, nil, &res); err != nil {
		return "", err
	}
	return res.TurnID, nil
}

// EventQuery returns the query string of GET /v1/sessions/{id}/events for f.
func EventQuery(f berth.EventFilter) url.Values {
	q := url.Values{}
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	if f.TurnID != "" {
		q.Set("turn", f.TurnID)
	}
	return q
}

// ListEvents returns one page of a session's log. The next page is the one
// after the last seq returned (the API's next_after); an empty page means
// there is nothing after f.After yet.
func (c *Client) ListEvents(ctx context.Context, id string, f berth.EventFilter) ([]berth.Event, error) {
	var page eventPage
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/events"), EventQuery(f), nil, &page); err != nil {
		return nil, err
	}
	return page.Events, nil
}

// Transcript returns a session's turns.
func (c *Client) Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error) {
	var t transcript
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/transcript"), nil, nil, &t); err != nil {
		return nil, err
	}
	return t.Turns, nil
}

// ListQueue returns a session's pending prompts.
func (c *Client) ListQueue(ctx context.Context, id string) (*berth.QueueView, error) {
	return call[berth.QueueView](ctx, c, http.MethodGet, sessionPath(id, "/queue"), nil, nil)
}

// CancelQueueEntry drops a pending prompt.
func (c *Client) CancelQueueEntry(ctx context.Context, id, entryID string) error {
	return c.Do(ctx, http.MethodDelete, sessionPath(id, "/queue/"+url.PathEscape(entryID)), nil, nil, nil)
}

// ListPermissions returns a session's permissions, all or in one state.
func (c *Client) ListPermissions(ctx context.Context, id, state string) ([]*berth.Permission, error) {
	var q url.Values
	if state != "" {
		q = url.Values{"state": {state}}
	}
	var res permissionList
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/permissions"), q, nil, &res); err != nil {
		return nil, err
	}
	return res.Permissions, nil
}

// DecidePermission answers a pending permission.
func (c *Client) DecidePermission(ctx context.Context, id, permID string, d berth.PermissionDecision) (*berth.Permission, error) {
	return call[berth.Permission](ctx, c, http.MethodPost, sessionPath(id, "/permissions/"+url.PathEscape(permID)), nil, d)
}

// ResumeSession resumes a stopped session.
func (c *Client) ResumeSession(ctx context.Context, id string) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/resume"), nil, nil)
}

// LoginCode is a one-time code that signs a browser in to the web UI.
type LoginCode struct {
	// Code is the code itself.
	Code string `json:"code"`
	// ExpiresAt is when the code stops working.
	ExpiresAt time.Time `json:"expires_at"`
	// URL is the web UI's address that signs in with the code.
	URL string `json:"url"`
}

// LoginCode mints a one-time sign-in code for the web UI (over the socket or
// with the token) and returns it with the address that uses it.
func (c *Client) LoginCode(ctx context.Context) (*LoginCode, error) {
	return call[LoginCode](ctx, c, http.MethodPost, "/v1/login/codes", nil, nil)
}

// PatchSession changes a session's name, labels, and the agent's mode,
// model or config options (docs/api.md, "Agent controls").
func (c *Client) PatchSession(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPatch, sessionPath(id, ""), nil, p)
}

// Authenticate runs ACP authenticate with one of the session's auth methods.
func (c *Client) Authenticate(ctx context.Context, id, methodID string) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/authenticate"), nil, struct {
		MethodID string `json:"method_id"`
	}{methodID})
}

// ClearSession gives the session a new agent conversation; cancel cancels
// a turn in flight first.
func (c *Client) ClearSession(ctx context.Context, id string, cancel bool) (*berth.Session, error) {
	var q url.Values
	if cancel {
		q = url.Values{"cancel": {"true"}}
	}
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/clear"), q, nil)
}

// ListElicitations returns a session's elicitations, all or in one state.
func (c *Client) ListElicitations(ctx context.Context, id, state string) ([]*berth.Elicitation, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	res, err := call[struct {
		Elicitations []*berth.Elicitation `json:"elicitations"`
	}](ctx, c, http.MethodGet, sessionPath(id, "/elicitations"), q, nil)
	if err != nil {
		return nil, err
	}
	return res.Elicitations, nil
}

// GetElicitation returns one elicitation of a session.
func (c *Client) GetElicitation(ctx context.Context, id, eid string) (*berth.Elicitation, error) {
	return call[berth.Elicitation](ctx, c, http.MethodGet, sessionPath(id, "/elicitations/"+url.PathEscape(eid)), nil, nil)
}

// AnswerElicitation answers a pending elicitation.
func (c *Client) AnswerElicitation(ctx context.Context, id, eid string, a berth.ElicitationAnswer) (*berth.Elicitation, error) {
	return call[berth.Elicitation](ctx, c, http.MethodPost, sessionPath(id, "/elicitations/"+url.PathEscape(eid)), nil, a)
}

// ListCheckpoints returns a session's checkpoints, oldest first.
func (c *Client) ListCheckpoints(ctx context.Context, id string) ([]*berth.Checkpoint, error) {
	res, err := call[struct {
		Checkpoints []*berth.Checkpoint `json:"checkpoints"`
	}](ctx, c, http.MethodGet, sessionPath(id, "/checkpoints"), nil, nil)
	if err != nil {
		return nil, err
	}
	return res.Checkpoints, nil
}

// Rewind restores a session's workspace to a checkpoint.
func (c *Client) Rewind(ctx context.Context, id string, req berth.RewindRequest) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/rewind"), nil, req)
}

// Fork creates a session from a checkpoint of another.
func (c *Client) Fork(ctx context.Context, id string, req berth.ForkRequest) (*berth.Session, error) {
	return call[berth.Session](ctx, c, http.MethodPost, sessionPath(id, "/fork"), nil, req)
}
