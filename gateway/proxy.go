package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// oauthBeta is the anthropic-beta a subscription (OAuth) token needs.
const oauthBeta = "oauth-2025-04-20"

// statusGone is a Call's status when the agent went away before an answer.
const statusGone = 499

// call is one call the gateway forwards.
type call struct {
	g       *Gateway
	up      *upstream
	session string
	api     api
	rest    string // the path on the upstream
	model   string
	cred    string
	start   time.Time

	status    int
	firstByte time.Duration
	meter     *meter       // the answer's usage, once it comes
	models    *modelReader // the request's model, when read as it streams
}

// forward sends the call to its upstream and the answer back to the agent,
// both as they come, then tells Sessions of it.
func (c *call) forward(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		body := http.MaxBytesReader(w, r.Body, c.g.maxBody)
		switch {
		case c.api == apiChat:
			// The one body read whole: it may need stream_options.
			buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), c.g.maxBody)+1))
			if _, err := buf.ReadFrom(body); err != nil {
				// Over the limit (a 413), or the agent went away.
				c.tooLarge(w, err)
				return
			}
			b, model := chatRequest(buf.Bytes())
			c.model = model
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		case c.api != apiNone && c.model == "":
			c.models = newModelReader(body)
			r.Body = c.models
		default:
			r.Body = body
		}
	}
	defer c.finish()
	proxy := &httputil.ReverseProxy{
		Rewrite:        c.rewrite,
		Transport:      c.g.transport,
		FlushInterval:  -1,
		ErrorLog:       c.g.errLog,
		BufferPool:     &c.g.buffers,
		ModifyResponse: c.answered,
		ErrorHandler:   c.failed,
	}
	proxy.ServeHTTP(&answerWriter{ResponseWriter: w, c: c}, r)
}

// rewrite makes the call the upstream gets: its URL, no credential of the
// agent's, the upstream's headers and credential.
func (c *call) rewrite(pr *httputil.ProxyRequest) {
	out, t := pr.Out, c.up.target
	out.URL = &url.URL{Scheme: t.Scheme, Host: t.Host, Path: t.Path + c.rest, RawQuery: withoutKey(out.URL.RawQuery)}
	out.Host = ""
	h := out.Header
	for _, k := range credentialHeaders {
		h.Del(k)
	}
	// The transport asks for gzip itself and hands the answer over
	// decompressed: the usage is read from it as it passes.
	h.Del("Accept-Encoding")
	// No switch of protocol: a tunnel would pass unread.
	h.Del("Upgrade")
	h.Del("Connection")
	for k, v := range c.up.Headers {
		h.Set(k, v)
	}
	c.authorize(h)
}

// authorize adds the upstream's credential to h, in its kind's way.
func (c *call) authorize(h http.Header) {
	if c.cred == "" {
		return
	}
	switch {
	case c.up.Kind == KindAnthropic && strings.HasPrefix(c.cred, "sk-ant-oat"):
		// A subscription (OAuth) token, such as Claude Code's login.
		h.Set("Authorization", "Bearer "+c.cred)
		betas := strings.Join(h.Values("Anthropic-Beta"), ",")
		if !hasToken(betas, oauthBeta) {
			betas = strings.TrimPrefix(betas+","+oauthBeta, ",")
		}
		h.Set("Anthropic-Beta", betas)
	case c.up.Kind == KindAnthropic:
		h.Set("X-Api-Key", c.cred)
	case c.up.Kind == KindGemini:
		h.Set("X-Goog-Api-Key", c.cred)
	default:
		h.Set("Authorization", "Bearer "+c.cred)
	}
}

// hasToken reports whether the comma-separated list has token.
func hasToken(list, token string) bool {
	for t := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(t) == token {
			return true
		}
	}
	return false
}

// withoutKey is query without its key parameters (Gemini's ?key=).
func withoutKey(query string) string {
	if !strings.Contains(query, "key=") {
		return query
	}
	q, _ := url.ParseQuery(query)
	q.Del("key")
	return q.Encode()
}

// answered starts reading the usage of the upstream's answer.
func (c *call) answered(res *http.Response) error {
	c.status = res.StatusCode
	if c.api != apiNone {
		c.meter = newMeter(c.api, res.Header.Get("Content-Type"))
		res.Body = &meteredBody{ReadCloser: res.Body, m: c.meter}
	}
	return nil
}

// failed answers a call the upstream did not answer.
func (c *call) failed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case c.tooLarge(w, err):
	case r.Context().Err() != nil:
		c.status = statusGone
	default:
		c.status = http.StatusBadGateway
		c.g.log.Warn("model gateway: the upstream could not be reached", "upstream", c.up.Name, "err", err)
		answerError(w, c.up.Kind, http.StatusBadGateway, "berth's model gateway could not reach the upstream "+
			strconv.Quote(c.up.Name))
	}
}

// tooLarge answers a 413 when err is a request body's over the limit, and
// reports whether it was.
func (c *call) tooLarge(w http.ResponseWriter, err error) bool {
	var e *http.MaxBytesError
	if !errors.As(err, &e) {
		return false
	}
	c.status = http.StatusRequestEntityTooLarge
	answerError(w, c.up.Kind, http.StatusRequestEntityTooLarge, c.g.tooLarge())
	return true
}

// finish tells Sessions of a model call.
func (c *call) finish() {
	if c.api == apiNone {
		return
	}
	var u usage
	if c.meter != nil {
		u = c.meter.u
	}
	model := c.model
	if c.models != nil {
		if m := c.models.name(); m != "" {
			model = m
		}
	}
	status := c.status
	if status == 0 {
		status = statusGone
	}
	c.g.called(c.session, Call{
		Upstream: c.up.Name, Model: model, Status: status,
		InputTokens: u.input, OutputTokens: u.output, CacheReadTokens: u.cacheRead, CacheWriteTokens: u.cacheWrite,
		CostUSD: c.up.Prices.cost(u), Duration: time.Since(c.start), FirstByte: c.firstByte,
	})
}

// meteredBody passes an answer on as it is read, through its meter.
type meteredBody struct {
	io.ReadCloser
	m *meter
}

// Read implements io.Reader.
func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.m.feed(p[:n])
	return n, err
}

// answerWriter is the agent's end of a call: it notes when the answer's
// first byte goes out.
type answerWriter struct {
	http.ResponseWriter
	c *call
}

// Write implements http.ResponseWriter.
func (a *answerWriter) Write(p []byte) (int, error) {
	if a.c.firstByte == 0 && len(p) > 0 {
		a.c.firstByte = time.Since(a.c.start)
	}
	return a.ResponseWriter.Write(p)
}

// Flush implements http.Flusher: each piece of a stream goes out as it
// comes.
func (a *answerWriter) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the agent's writer.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// copyBuffer is the size of the buffers answers are copied through.
const copyBuffer = 32 << 10

// bufferPool lends the proxy its copy buffers, so that a call allocates
// none.
type bufferPool struct{ p sync.Pool }

// Get implements httputil.BufferPool.
func (b *bufferPool) Get() []byte {
	if a, ok := b.p.Get().(*[copyBuffer]byte); ok {
		return a[:]
	}
	return new([copyBuffer]byte)[:]
}

// Put implements httputil.BufferPool.
func (b *bufferPool) Put(buf []byte) {
	if len(buf) == copyBuffer {
		b.p.Put((*[copyBuffer]byte)(buf))
	}
}
