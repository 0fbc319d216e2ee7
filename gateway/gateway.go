// Package gateway is berth's model gateway (docs/api.md, The model
// gateway): the model APIs an agent calls, served to it with a key worth
// nothing outside berth, and forwarded to the configured upstream with the
// user's real credential added on the way out. The same choke point counts
// every call's tokens and cost and refuses calls past a session's budget.
//
// # Routes
//
// An agent calls http://GATEWAY/UPSTREAM/PATH: the gateway forwards it to
// the upstream's URL (with its path prefix, if any) + PATH, query kept.
// It serves the model APIs only, by the upstream's kind:
//
//	anthropic         POST /v1/messages, POST /v1/messages/count_tokens,
//	                  GET /v1/models[/ID]
//	openai,           POST [/v1]/chat/completions, [/v1]/completions,
//	openai-responses  [/v1]/embeddings, [/v1]/responses,
//	                  [/v1]/responses/compact, [/v1]/responses/input_tokens,
//	                  GET [/v1]/models[/ID]
//	gemini            POST /VERSION/models/MODEL:generateContent,
//	                  :streamGenerateContent, :countTokens, :embedContent,
//	                  :batchEmbedContents; GET /VERSION/models[/MODEL]
//	                  (VERSION: v1, v1beta or v1alpha)
//
// Any other call is a 404: the user's key reaches nothing else of the
// provider's (files, batches, fine-tuning, the organization).
//
// # Keys
//
// Register gives a session its key ("berth-gw-" and 44 characters); the
// agent presents it as its SDK does: x-api-key, Authorization: Bearer,
// x-goog-api-key or ?key=. A call without the key of a registered session
// is a 401. Every one of those headers and ?key= is removed from the call;
// the upstream's credential is added in its kind's way (anthropic:
// x-api-key, or Authorization: Bearer and the anthropic-beta
// oauth-2025-04-20 for a subscription token sk-ant-oat…; openai:
// Authorization: Bearer; gemini: x-goog-api-key), then the upstream's
// configured headers. The credential is read at every call, so one set
// after a failure makes the next call work.
//
// # Environment
//
// AgentEnv gives the variables that point an agent at the gateway:
//
//	anthropic         ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
//	openai,           OPENAI_BASE_URL and OPENAI_API_BASE (…/UPSTREAM/v1),
//	openai-responses  OPENAI_API_KEY
//	gemini            GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY
//
// # Errors
//
// The gateway's own answers are in the upstream's error format, so the
// agent shows them as it shows the provider's: anthropic
// {"type":"error","error":{"type","message"}}; openai
// {"error":{"message","type","param","code"}}; gemini
// {"error":{"code","message","status"}}. 401: no valid key, or the
// upstream's credential is not set (the message says how to set it); 404:
// not a model API; 413: a body over the limit (32 MiB); 429: Sessions.Admit
// refused (a spent budget; insufficient_quota, RESOURCE_EXHAUSTED); 502:
// the upstream could not be reached. All but the 5xx carry
// x-should-retry: false.
//
// # Usage
//
// Each answer's usage is read as it passes, from the upstream's own
// fields, streaming or not: anthropic usage (input_tokens,
// cache_creation_input_tokens, cache_read_input_tokens, output_tokens;
// message_start, then message_delta); openai usage (prompt_tokens,
// prompt_tokens_details.cached_tokens, completion_tokens: for a stream,
// the gateway sets stream_options.include_usage to true in the request so
// that its last chunk has it); responses usage (input_tokens,
// input_tokens_details.cached_tokens, output_tokens; response.completed);
// gemini usageMetadata (promptTokenCount, cachedContentTokenCount,
// candidatesTokenCount, thoughtsTokenCount; the last one). The model is the
// request's "model" (Gemini: the path's). Sessions.Called gets each model
// call's Call once its answer has ended.
package gateway

import (
	"context"
	"encoding/base64"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// DefaultMaxBody bounds a call's request body when Options.MaxBody is 0.
const DefaultMaxBody = 32 << 20

// Credentials gives the value of a credential, read at every call.
type Credentials interface {
	// Credential returns the value of the credential name: an error with
	// code berth.ENotFound when it is not set; any other error when it
	// cannot be read.
	Credential(ctx context.Context, name string) (string, error)
}

// Sessions is what the gateway asks and tells the daemon about the
// sessions whose agents call it. It is never called with a lock of the
// gateway's held.
type Sessions interface {
	// Admit is asked before a model call of sessionID is forwarded to
	// upstream. An error refuses it: a 429 whose message is the error's
	// (berth.ErrorMessage: "this session's budget of $5.00 is spent"); a
	// 503 when the error's code is berth.EUnavailable or berth.EInternal.
	Admit(ctx context.Context, sessionID, upstream string) error
	// Called tells of a model call forwarded for sessionID, once its
	// answer has ended. It runs on a goroutine of the gateway's own, so a
	// slow one never holds the agent's answer back; Close waits for it.
	Called(sessionID string, call Call)
	// Missing tells that a call of sessionID was refused because the
	// credential it needs is not set.
	Missing(sessionID, credential string)
}

// Options configure a Gateway.
type Options struct {
	// Upstreams is the table of upstreams (Resolve's; nil: Builtins()).
	Upstreams []Upstream
	// Credentials gives the upstreams' credentials.
	Credentials Credentials
	// Sessions is asked and told about the calls (nil: every call is
	// admitted, nothing is told).
	Sessions Sessions
	// MaxBody bounds a call's request body (0: DefaultMaxBody).
	MaxBody int64
	// Transport sends the calls upstream (nil: a transport of the
	// gateway's own, which keeps connections alive for the next calls).
	Transport http.RoundTripper
	// Logger logs what the agent is not told (nil: slog.Default()).
	Logger *slog.Logger
}

// Gateway is the model gateway: an http.Handler of the routes the package
// comment gives. It is safe for concurrent use.
type Gateway struct {
	upstreams map[string]*upstream
	creds     Credentials
	sessions  Sessions
	maxBody   int64
	transport http.RoundTripper
	own       *http.Transport // the transport the gateway made, or nil
	log       *slog.Logger
	errLog    *log.Logger
	buffers   bufferPool
	keys      keyring

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup // Called in flight
}

// upstream is an Upstream with its URL parsed.
type upstream struct {
	Upstream
	target *url.URL
}

// New returns a Gateway of opts. An upstream that does not pass Validate
// is an error with code berth.EInvalid.
func New(opts Options) (*Gateway, error) {
	if opts.Credentials == nil {
		return nil, berth.Errorf(berth.EInvalid, "the model gateway needs a source of credentials")
	}
	table := opts.Upstreams
	if table == nil {
		table = Builtins()
	}
	g := &Gateway{upstreams: map[string]*upstream{}, creds: opts.Credentials, sessions: opts.Sessions,
		maxBody: opts.MaxBody, transport: opts.Transport, log: opts.Logger}
	for i, u := range table {
		if err := u.Validate(); err != nil {
			return nil, berth.WrapError(berth.EInvalid, err, "models[%d].%s", i, berth.ErrorMessage(err))
		}
		if _, dup := g.upstreams[u.Name]; dup {
			return nil, berth.Errorf(berth.EInvalid, "models[%d].name: %q is there twice", i, u.Name)
		}
		target, _ := url.Parse(u.URL)
		target.Path = strings.TrimSuffix(target.Path, "/")
		target.RawPath = ""
		g.upstreams[u.Name] = &upstream{Upstream: u, target: target}
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBody
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.errLog = slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)
	if g.transport == nil {
		g.own = newTransport()
		g.transport = g.own
	}
	return g, nil
}

// maxIdleConns bounds the idle connections the gateway's own transport
// keeps, to one upstream as to all: as many as calls the daemon serves at
// once, so that the calls of many agents streaming at once each find a
// connection again rather than one closed and dialled anew (a TLS
// handshake to a real provider).
const maxIdleConns = 512

// newTransport is the gateway's own transport: connections to the
// upstreams kept alive and reused, HTTP/2 where they speak it.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = maxIdleConns
	t.MaxIdleConnsPerHost = maxIdleConns
	t.IdleConnTimeout = 90 * time.Second
	t.ForceAttemptHTTP2 = true
	return t
}

// Upstream returns the upstream named name.
func (g *Gateway) Upstream(name string) (Upstream, bool) {
	u, ok := g.upstreams[name]
	if !ok {
		return Upstream{}, false
	}
	return u.Upstream, true
}

// Register gives sessionID a new key, worth nothing outside this gateway,
// and returns it; a key it had before dies.
func (g *Gateway) Register(sessionID string) string { return g.keys.register(sessionID) }

// RegisterKey makes key (one Key made) sessionID's key, in place of any
// it had: a key derived from the session lets an agent that outlives a
// daemon restart call the next daemon's gateway with the key it was
// given. A key not of Key's shape is an error with code berth.EInvalid.
func (g *Gateway) RegisterKey(sessionID, key string) error {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if _, err := base64.RawURLEncoding.DecodeString(rest); !ok || err != nil || len(key) != sessionKeyLn {
		return berth.Errorf(berth.EInvalid, "not a model gateway key")
	}
	g.keys.set(sessionID, key)
	return nil
}

// Unregister ends sessionID's key: its next call is a 401. Calls in
// flight go on.
func (g *Gateway) Unregister(sessionID string) { g.keys.unregister(sessionID) }

// ServeHTTP serves the calls of every registered session.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.serve(w, r, "") }

// ForSession returns a handler that serves the calls of sessionID only
// (for a listener of that session's own): any other key is a 401.
func (g *Gateway) ForSession(sessionID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, sessionID) })
}

// Close waits, until ctx ends, for the Called callbacks in flight, and
// closes the idle connections of the gateway's own transport. Calls
// answered after it tell Called on their own goroutine.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		g.calls.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if g.own != nil {
		g.own.CloseIdleConnections()
	}
	return err
}

// called tells Sessions of a call, on a goroutine Close waits for (or on
// the caller's, once Close began).
func (g *Gateway) called(sessionID string, c Call) {
	if g.sessions == nil {
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		g.sessions.Called(sessionID, c)
		return
	}
	g.calls.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.calls.Done()
		g.sessions.Called(sessionID, c)
	}()
}

// serve serves one call; only, when set, is the one session it serves.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, only string) {
	start := time.Now()
	name, rest := splitUpstream(r.URL.Path)
	up, ok := g.upstreams[name]
	if !ok {
		answerError(w, "", http.StatusNotFound, "berth's model gateway has no upstream "+strconv.Quote(name)+
			": the configuration's [[models]] names them")
		return
	}
	session, ok := g.keys.session(presentedKey(r))
	if !ok || only != "" && session != only {
		answerError(w, up.Kind, http.StatusUnauthorized,
			"not the key of a running berth session: berth's model gateway serves the agents of running sessions only, with the key berth gave them")
		return
	}
	a, model, ok := route(up.Kind, r.Method, rest)
	if !ok {
		answerError(w, up.Kind, http.StatusNotFound, "berth's model gateway does not serve "+r.Method+" "+rest+
			" (it serves the model APIs only)")
		return
	}
	if r.ContentLength > g.maxBody {
		answerError(w, up.Kind, http.StatusRequestEntityTooLarge, g.tooLarge())
		return
	}
	if a != apiNone && g.sessions != nil {
		if err := g.sessions.Admit(r.Context(), session, up.Name); err != nil {
			status := http.StatusTooManyRequests
			if berth.IsCode(err, berth.EUnavailable) || berth.IsCode(err, berth.EInternal) {
				status = http.StatusServiceUnavailable
			}
			answerError(w, up.Kind, status, berth.ErrorMessage(err))
			return
		}
	}
	cred, ok := g.credential(w, r, up, session)
	if !ok {
		return
	}
	c := &call{g: g, up: up, session: session, api: a, rest: rest, model: model, cred: cred, start: start}
	c.forward(w, r)
}

// tooLarge is the message of a 413.
func (g *Gateway) tooLarge() string {
	return "the request body is larger than berth's model gateway takes (" + sizeOf(g.maxBody) + ")"
}

// credential reads up's credential for a call of session, or answers the
// call when it cannot: ok is false then.
func (g *Gateway) credential(w http.ResponseWriter, r *http.Request, up *upstream, session string) (string, bool) {
	if up.Credential == "" {
		return "", true
	}
	v, err := g.creds.Credential(r.Context(), up.Credential)
	v = strings.TrimSpace(v)
	switch {
	case err == nil && v != "" && !strings.ContainsAny(v, "\r\n\x00"):
		return v, true
	case err == nil && v != "":
		g.log.Warn("model gateway: a credential holds a line break or NUL", "credential", up.Credential)
		answerError(w, up.Kind, http.StatusServiceUnavailable, "the credential "+strconv.Quote(up.Credential)+
			" is not a valid key (it holds a line break): berth credentials set "+up.Credential)
	case err == nil || berth.IsCode(err, berth.ENotFound):
		if g.sessions != nil {
			g.sessions.Missing(session, up.Credential)
		}
		answerError(w, up.Kind, http.StatusUnauthorized, "the credential "+strconv.Quote(up.Credential)+
			" is not set: berth credentials set "+up.Credential)
	default:
		g.log.Warn("model gateway: reading a credential", "credential", up.Credential, "err", err)
		answerError(w, up.Kind, http.StatusServiceUnavailable, "the credential "+strconv.Quote(up.Credential)+" could not be read")
	}
	return "", false
}

// sizeOf says n bytes in MiB or KiB.
func sizeOf(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
