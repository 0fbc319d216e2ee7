// Package acp is berth's client for the Agent Client Protocol v1: JSON-RPC
// 2.0 over newline-delimited JSON on any io.ReadWriteCloser (a child's
// stdio today, a shim's socket tomorrow). It imports nothing from berth.
//
// Unlike general-purpose SDKs it never drops a connection because the agent
// is fast: one reader goroutine reads a line, dispatches it in order and only
// then reads the next, so a burst of notifications turns into back-pressure
// on the agent's stdout pipe instead of an overflowing queue. Lines may be up
// to Options.MaxLineBytes (64 MiB by default); longer ones and lines that are
// not JSON are skipped and counted, never fatal.
package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/internal/optx"
)

// DefaultMaxLineBytes is the default cap on one JSON-RPC line.
const DefaultMaxLineBytes = 64 << 20

// ErrClosed is returned by calls on a connection whose peer is gone.
var ErrClosed = errors.New("acp: connection closed")

// Handler serves what the peer sends.
type Handler interface {
	// HandleNotification is called for each notification, in arrival order,
	// on the reader goroutine: the next line is not read until it returns.
	// It may block (that is back-pressure) but must never wait for an
	// answer from the peer. params is valid only during the call and has
	// not been validated: decode it (json.Unmarshal validates) or check it
	// with json.Valid, and copy whatever is kept.
	HandleNotification(method string, params json.RawMessage)
	// HandleRequest serves one request on its own goroutine. params is the
	// handler's own copy, not yet validated. A returned *Error is sent as
	// is; any other error becomes an internal error.
	HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// lineTaker is implemented by a Handler that can keep a notification's
// params and write over them: the reader offers it the lines it read into
// a buffer of their own (long ones), which it never touches again.
type lineTaker interface {
	HandleOwnedNotification(method string, params json.RawMessage)
}

// Options tune a connection.
type Options struct {
	// MaxLineBytes caps one inbound line; longer lines are skipped.
	MaxLineBytes int
	// WriteTimeout bounds one write when the writer supports deadlines.
	WriteTimeout time.Duration
	// OnSkippedLine, when set, sees each inbound line that is not JSON-RPC
	// (at most 4 KiB of it), for diagnostics.
	OnSkippedLine func(line []byte)
	// AdmitRequest, when set, is asked about each request of the peer
	// before it is served, in the order they come, with the length of its
	// line: an error refuses it (the peer gets it as the answer; an *Error
	// keeps its code).
	AdmitRequest func(method string, size int) error
	// OnOversizedLine, when set, is told of each inbound line longer than
	// MaxLineBytes (size is the line's length without its newline), on the
	// reader goroutine, with Position at the end of that line.
	OnOversizedLine func(size int64)
	Logger          *slog.Logger
	// StartOffset is the stream offset of the first byte the connection
	// reads: a connection reattached to a spooled stream starts mid-way.
	StartOffset int64
	// LastID is the highest request id already used on this stream; new
	// requests are numbered after it.
	LastID int64
	// ReplayUntil and ReplayServe let a reattached connection read again
	// what an earlier one read without serving twice: a request whose line
	// ends at or before ReplayUntil is served only if its id, as written,
	// is in ReplayServe (the earlier connection never answered it).
	ReplayUntil int64
	ReplayServe map[string]bool
}

// Stats counts what the reader saw.
type Stats struct {
	// Messages is the number of JSON-RPC messages read.
	Messages int64
	// SkippedLines counts lines that were not JSON-RPC messages.
	SkippedLines int64
	// OversizedLines counts lines longer than MaxLineBytes.
	OversizedLines int64
}

// message is one JSON-RPC 2.0 message in either direction.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// response is what a pending call receives.
type response struct {
	result json.RawMessage
	err    *Error
}

// pendingCall is a request waiting for its answer. then, when set, runs on
// the reader goroutine as the answer arrives.
type pendingCall struct {
	ch   chan response
	then func(result json.RawMessage, err *Error)
}

// deadliner is implemented by writers that support write deadlines.
type deadliner interface{ SetWriteDeadline(time.Time) error }

// Conn is one JSON-RPC connection to an agent.
type Conn struct {
	rwc     io.ReadWriteCloser
	handler Handler
	opts    Options
	log     *slog.Logger

	wmu  sync.Mutex
	wbuf []byte

	nextID atomic.Int64
	// pos is the stream offset just past the line being dispatched (or
	// the last one dispatched).
	pos atomic.Int64
	// answeredTo is pos as the latest answer to a call was dispatched.
	answeredTo atomic.Int64
	mu         sync.Mutex
	pending    map[int64]pendingCall
	closed     bool

	baseCtx    context.Context
	cancelBase context.CancelFunc
	requests   sync.WaitGroup
	readerDone chan struct{}
	err        error // why the reader stopped; read after readerDone

	messages, skipped, oversized atomic.Int64
	startOnce, closeOnce         sync.Once
}

// NewConn returns a connection over rwc; Start begins reading.
func NewConn(rwc io.ReadWriteCloser, h Handler, opts Options) *Conn {
	optx.Default(&opts.MaxLineBytes, DefaultMaxLineBytes)
	optx.Default(&opts.WriteTimeout, 30*time.Second)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		rwc: rwc, handler: h, opts: opts, log: opts.Logger,
		pending: make(map[int64]pendingCall), baseCtx: ctx, cancelBase: cancel,
		readerDone: make(chan struct{}),
	}
	c.nextID.Store(opts.LastID)
	c.pos.Store(opts.StartOffset)
	return c
}

// Position is the stream offset just past the line being dispatched, or
// the last one dispatched: called from a handler running on the reader
// goroutine, it says where the line that caused the call ends.
func (c *Conn) Position() int64 { return c.pos.Load() }

// AnsweredTo is the stream offset just past the latest answer to one of
// the connection's calls, 0 before the first: every line before it has
// been dispatched.
func (c *Conn) AnsweredTo() int64 { return c.answeredTo.Load() }

// Start starts the reader goroutine. Close waits for it.
func (c *Conn) Start() {
	c.startOnce.Do(func() { go c.readLoop() })
}

// Done is closed when the reader stops: the peer closed its end or the
// connection was closed.
func (c *Conn) Done() <-chan struct{} { return c.readerDone }

// Err returns why the reader stopped (nil for a clean EOF). Valid after Done.
func (c *Conn) Err() error {
	select {
	case <-c.readerDone:
		return c.err
	default:
		return nil
	}
}

// Stats returns the reader's counters.
func (c *Conn) Stats() Stats {
	return Stats{Messages: c.messages.Load(), SkippedLines: c.skipped.Load(), OversizedLines: c.oversized.Load()}
}

// Close closes the transport, fails pending calls, cancels inbound request
// handlers and waits for the reader and every handler to return.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.rwc.Close()
		c.cancelBase()
		c.failPending()
		// A reader that was never started has nothing to wait for.
		c.startOnce.Do(func() { close(c.readerDone) })
		<-c.readerDone
		c.requests.Wait()
	})
	return err
}

// Call sends a request and waits for its answer, decoded into result (which
// may be nil). A JSON-RPC error from the peer is returned as *Error. When
// ctx ends first the call returns ctx.Err(); the request stays sent.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.CallThen(ctx, method, params, result, nil)
}

// CallThen is Call with a hook: then runs on the reader goroutine as soon
// as the answer arrives, before the next line from the peer is handled, so
// it is ordered exactly against the peer's notifications. It does not run
// when the call fails without an answer (closed connection, ctx).
func (c *Conn) CallThen(ctx context.Context, method string, params, result any, then func(result json.RawMessage, err *Error)) error {
	id := c.nextID.Add(1)
	ch, err := c.register(id, then)
	if err != nil {
		return err
	}
	defer c.forget(id)
	if err := c.send(ctx, &message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method}, params); err != nil {
		return err
	}
	if sent, ok := ctx.Value(sentKey{}).(func()); ok {
		sent()
	}
	return c.await(ctx, method, ch, result)
}

// Expect registers a request an earlier connection sent on this stream
// (before a daemon restart) as pending, as CallThen would have: then runs
// on the reader goroutine as the answer arrives, and wait returns the
// answer decoded into result. Call it before Start, or an answer already
// spooled finds nobody waiting.
func (c *Conn) Expect(id int64, method string, then func(result json.RawMessage, err *Error)) (wait func(ctx context.Context, result any) error, err error) {
	ch, err := c.register(id, then)
	if err != nil {
		return nil, err
	}
	if cur := c.nextID.Load(); cur < id {
		c.nextID.CompareAndSwap(cur, id)
	}
	return func(ctx context.Context, result any) error {
		defer c.forget(id)
		return c.await(ctx, method, ch, result)
	}, nil
}

// register makes id a pending call.
func (c *Conn) register(id int64, then func(result json.RawMessage, err *Error)) (chan response, error) {
	ch := make(chan response, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.pending[id] = pendingCall{ch: ch, then: then}
	return ch, nil
}

// await waits for a pending call's answer and decodes it into result.
func (c *Conn) await(ctx context.Context, method string, ch chan response, result any) error {
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if result == nil || len(r.result) == 0 {
			// The result is not decoded, so check at least that it is JSON.
			if len(r.result) > 0 && !json.Valid(r.result) {
				return &Error{Code: CodeParseError, Message: method + ": the answer is not valid JSON"}
			}
			return nil
		}
		if err := json.Unmarshal(r.result, result); err != nil {
			return fmt.Errorf("acp: decode %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Redeliver serves a request line again: one the agent sent to an earlier
// connection that never answered it (the daemon died first). Anything but
// a request is ignored.
func (c *Conn) Redeliver(line []byte) {
	e, ok := scanEnvelope(bytes.TrimSpace(line))
	if !ok || isNull(e.id) || e.method == nil {
		return
	}
	method, ok := e.methodName()
	if !ok || method == "" {
		return
	}
	c.serve(method, bytes.Clone(e.id), bytes.Clone(e.params))
}

// sentKey is the context key of WithSent's hook.
type sentKey struct{}

// WithSent returns a context whose calls (CallThen, and the Client calls
// built on it) run sent once their request is written, before they wait
// for the answer: a caller can order a later message after the request.
func WithSent(ctx context.Context, sent func()) context.Context {
	return context.WithValue(ctx, sentKey{}, sent)
}

// Notify sends a notification.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	return c.send(ctx, &message{Method: method}, params)
}

// forget drops a pending call.
func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// failPending marks the connection closed and fails every pending call.
func (c *Conn) failPending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, p := range c.pending {
		p.ch <- response{err: &Error{Code: CodeInternal, Message: ErrClosed.Error()}}
		delete(c.pending, id)
	}
}

// send encodes m with params and writes it as one line. A failed or partial
// write leaves the framing broken, so it closes the transport.
func (c *Conn) send(ctx context.Context, m *message, params any) error {
	m.JSONRPC = "2.0"
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("acp: encode %s: %w", m.Method, err)
		}
		m.Params = b
	}
	return c.write(ctx, m)
}

// write serialises m and writes it with a deadline when possible.
func (c *Conn) write(ctx context.Context, m *message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := bytes.NewBuffer(c.wbuf[:0])
	if err := json.NewEncoder(buf).Encode(m); err != nil { // Encode appends '\n'
		return fmt.Errorf("acp: encode: %w", err)
	}
	if d, ok := c.rwc.(deadliner); ok {
		deadline := time.Now().Add(c.opts.WriteTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		_ = d.SetWriteDeadline(deadline)
	}
	_, err := c.rwc.Write(buf.Bytes())
	if cap(buf.Bytes()) <= 1<<20 {
		c.wbuf = buf.Bytes()
	}
	if err != nil {
		c.log.Warn("acp write failed; closing connection", "err", err)
		_ = c.rwc.Close()
		return fmt.Errorf("%w: write: %v", ErrClosed, err)
	}
	return nil
}

// readBufferSize is the line reader's buffer: a line that fits is read in
// place, a longer one is gathered in blocks. Every live session holds one
// while it waits for its agent, so it is small (a thousand idle sessions
// held 64 MB at 64 KiB).
const readBufferSize = 8 << 10

// readLoop reads lines until EOF and dispatches each in order.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	r := bufio.NewReaderSize(c.rwc, readBufferSize)
	var long []byte
	for {
		line, owned, over, err := c.readLine(r, &long)
		if len(line) > 0 {
			c.dispatch(line, owned)
		}
		if over > 0 && c.opts.OnOversizedLine != nil {
			c.opts.OnOversizedLine(over)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				c.err = err
			}
			c.failPending()
			return
		}
	}
}

// readLine returns the next line without its newline; owned says it is in
// a buffer of its own that the reader never reuses. A line over the cap is
// discarded whole and counted: over is then its length. long is scratch
// space reused across calls.
func (c *Conn) readLine(r *bufio.Reader, long *[]byte) (line []byte, owned bool, over int64, err error) {
	frag, err := r.ReadSlice('\n')
	read := int64(len(frag))
	// The line's end is known before it is dispatched.
	defer func() { c.pos.Add(read) }()
	if err == nil {
		return frag, false, 0, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return frag, false, 0, err
	}
	// The line is longer than the buffer: gather it in blocks up to the
	// cap, then join them once into a buffer of its exact size, so a long
	// line costs twice its size at most while it is read (growing one
	// slice would allocate several times that).
	blocks := newLineBlocks(*long, c.opts.MaxLineBytes)
	blocks.add(frag)
	for {
		frag, err = r.ReadSlice('\n')
		read += int64(len(frag))
		blocks.add(frag)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		break
	}
	if blocks.over {
		c.oversized.Add(1)
		size := read
		if err == nil {
			size-- // the newline
		}
		c.log.Warn("acp line over the cap skipped", "bytes", size, "max_bytes", c.opts.MaxLineBytes)
		*long = blocks.first()
		return nil, false, size, err
	}
	line, *long, owned = blocks.join()
	return line, owned, 0, err
}

// dispatch classifies one line and hands it on. owned says the line's
// buffer may be handed over for good.
func (c *Conn) dispatch(line []byte, owned bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	e, ok := scanEnvelope(line)
	method, hasMethod := "", false
	if ok && e.method != nil {
		method, hasMethod = e.methodName()
		ok = hasMethod && method != ""
	}
	hasID := !isNull(e.id)
	if !ok || (!hasMethod && !hasID) || (hasID && !json.Valid(e.id)) {
		c.skipped.Add(1)
		if c.opts.OnSkippedLine != nil {
			c.opts.OnSkippedLine(line[:min(len(line), 4096)])
		}
		return
	}
	c.messages.Add(1)
	switch {
	case hasMethod && hasID:
		if c.opts.ReplayUntil > 0 && c.pos.Load() <= c.opts.ReplayUntil && !c.opts.ReplayServe[string(e.id)] {
			// Answered by an earlier connection: serving it again would act twice.
			return
		}
		if c.opts.AdmitRequest != nil {
			if err := c.opts.AdmitRequest(method, len(line)); err != nil {
				c.answer(method, bytes.Clone(e.id), nil, err)
				return
			}
		}
		c.serve(method, bytes.Clone(e.id), bytes.Clone(e.params))
	case hasMethod:
		if t, ok := c.handler.(lineTaker); ok && owned {
			t.HandleOwnedNotification(method, e.params)
			return
		}
		c.handler.HandleNotification(method, e.params)
	default:
		c.deliver(e)
	}
}

// deliver passes a response to its pending call.
func (c *Conn) deliver(e envelope) {
	id, err := strconv.ParseInt(string(e.id), 10, 64)
	if err != nil {
		// Clipped: an agent's id may be megabytes.
		c.log.Debug("acp response with an id we never sent", "id", string(e.id[:min(len(e.id), 64)]))
		return
	}
	c.mu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		c.log.Debug("acp response for no pending call", "id", id)
		return
	}
	c.answeredTo.Store(c.pos.Load())
	r := response{result: bytes.Clone(e.result)}
	if !isNull(e.err) {
		r.err = new(Error)
		if json.Unmarshal(e.err, r.err) != nil {
			r.err = &Error{Code: CodeInternal, Message: "the agent sent a malformed error"}
		}
	}
	if p.then != nil {
		p.then(r.result, r.err)
	}
	p.ch <- r
}

// serve runs an inbound request on its own goroutine and writes the answer.
func (c *Conn) serve(method string, id, params json.RawMessage) {
	c.goRequest(func() {
		result, err := c.handler.HandleRequest(c.baseCtx, method, params)
		c.sendAnswer(method, id, result, err)
	})
}

// answer answers a request without serving it (AdmitRequest refused
// it), off the reader's goroutine: the peer's stdin may be full.
func (c *Conn) answer(method string, id json.RawMessage, result any, err error) {
	c.goRequest(func() { c.sendAnswer(method, id, result, err) })
}

// goRequest runs f, the work of one inbound request, on a goroutine that
// Close waits for; on a closed connection it does nothing.
func (c *Conn) goRequest(f func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.requests.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.requests.Done()
		f()
	}()
}

// sendAnswer writes the answer to request id: its result, or err.
func (c *Conn) sendAnswer(method string, id json.RawMessage, result any, err error) {
	out := &message{JSONRPC: "2.0", ID: id}
	if err != nil {
		var rpcErr *Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &Error{Code: CodeInternal, Message: err.Error()}
		}
		out.Error = rpcErr
	} else {
		b, merr := json.Marshal(result)
		if merr != nil {
			out.Error = &Error{Code: CodeInternal, Message: "encode result"}
		} else {
			out.Result = b
		}
	}
	if werr := c.write(c.baseCtx, out); werr != nil {
		c.log.Debug("acp answer not sent", "method", method, "err", werr)
	}
}
