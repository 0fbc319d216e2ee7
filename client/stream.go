package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
)

// maxSSELine is the longest SSE line the client accepts (an event's JSON).
const maxSSELine = 64 << 20

// StreamEvents follows a session's log from after on (berth.SessionService):
// the stored events, then the live ones, in seq order, until Next returns
// io.EOF (the session is stopped and every event was read). A dropped
// connection is not an error: the stream reconnects with Last-Event-ID set
// to the last seq it returned, so nothing is missed and nothing repeats,
// and gives up with EUnavailable only after several failed attempts in a
// row. ctx bounds the whole stream; the ctx of one Next bounds that call
// only (the next call reconnects). Close releases the connection.
func (c *Client) StreamEvents(ctx context.Context, id string, after int64) (berth.EventStream, error) {
	s := &eventStream{after: after}
	s.follower = c.newFollower(ctx, true, func(ctx context.Context) (*http.Response, error) {
		header := http.Header{
			"Accept":        {"text/event-stream"},
			"Last-Event-Id": {strconv.FormatInt(s.after, 10)},
		}
		return c.send(ctx, http.MethodGet, sessionPath(id, "/events/stream"), nil, nil, header)
	})
	// The first connection is made now, so that a session that does not
	// exist is an error here, as it is from the manager.
	if err := s.connect(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// eventStream is the berth.EventStream of a session's SSE stream.
type eventStream struct {
	*follower
	// after is the seq of the last event returned.
	after int64
}

// Next implements berth.EventStream: it returns the next event.
func (s *eventStream) Next(ctx context.Context) ([]berth.Event, error) {
	ev, err := s.nextEvent(ctx)
	if err != nil {
		return nil, err
	}
	return []berth.Event{ev}, nil
}

// nextEvent returns the next event not returned yet.
func (s *eventStream) nextEvent(ctx context.Context) (berth.Event, error) {
	data, err := s.nextData(ctx)
	if err != nil {
		return berth.Event{}, err
	}
	var ev berth.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return berth.Event{}, s.fail(berth.WrapError(berth.EInternal, err, "the daemon sent an event that is not valid JSON"))
	}
	return ev, nil
}

// nextData returns the JSON of the next event not returned yet.
func (s *eventStream) nextData(ctx context.Context) ([]byte, error) {
	for {
		msg, err := s.next(ctx)
		if err != nil {
			return nil, err
		}
		if msg.event == "error" {
			return nil, s.fail(decodeErrorEvent(msg.data))
		}
		if !msg.hasID {
			continue
		}
		seq, perr := strconv.ParseInt(msg.id, 10, 64)
		if perr != nil {
			return nil, s.fail(berth.WrapError(berth.EInternal, perr, "the daemon sent an event with a bad id %q", msg.id))
		}
		// A reconnection never repeats an event, but guard the promise anyway.
		if seq <= s.after {
			continue
		}
		s.after = seq
		s.progressed = true
		return msg.data, nil
	}
}

// Events is StreamEvents as an iterator: it yields each event in seq
// order and ends when the daemon ends the stream. On an error it yields
// (zero Event, err) once and ends; the end of ctx is such an error, a
// dropped connection is not (see StreamEvents). Breaking out of the loop
// closes the stream.
func (c *Client) Events(ctx context.Context, id string, after int64) iter.Seq2[berth.Event, error] {
	return func(yield func(berth.Event, error) bool) {
		st, err := c.StreamEvents(ctx, id, after)
		if err != nil {
			yield(berth.Event{}, err)
			return
		}
		s := st.(*eventStream)
		defer s.Close()
		for {
			ev, err := s.nextEvent(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(berth.Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// EventsRaw is Events yielding each event's JSON exactly as the daemon
// sent it (for `berth logs -o json`).
func (c *Client) EventsRaw(ctx context.Context, id string, after int64) iter.Seq2[json.RawMessage, error] {
	return func(yield func(json.RawMessage, error) bool) {
		st, err := c.StreamEvents(ctx, id, after)
		if err != nil {
			yield(nil, err)
			return
		}
		s := st.(*eventStream)
		defer s.Close()
		for {
			data, err := s.nextData(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(json.RawMessage(bytes.Clone(data)), nil) {
				return
			}
		}
	}
}

// StreamChanges follows the changes of every session (GET
// /v1/events/stream, berth.SessionService) from lastEventID on ("" for the
// next change). Each change has its Session JSON in Data; a resync change
// means the caller must list the sessions again. A dropped connection is
// not an error: the stream reconnects with Last-Event-ID set to the last id
// it returned, so nothing is missed and nothing repeats while the daemon
// runs (after a daemon restart the first change is a resync). The stream
// has no end: Next returns only changes or an error that reconnecting
// cannot cure.
func (c *Client) StreamChanges(ctx context.Context, lastEventID string) (berth.ChangeStream, error) {
	s := &changeStream{last: lastEventID}
	s.follower = c.newFollower(ctx, false, func(ctx context.Context) (*http.Response, error) {
		header := http.Header{"Accept": {"text/event-stream"}}
		if s.last != "" {
			header.Set("Last-Event-Id", s.last)
		}
		return c.send(ctx, http.MethodGet, "/v1/events/stream", nil, nil, header)
	})
	if err := s.connect(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// changeStream is the berth.ChangeStream of the all-sessions SSE stream.
type changeStream struct {
	*follower
	// last is the id of the last change returned.
	last string
}

// Next implements berth.ChangeStream: it returns the next change.
func (s *changeStream) Next(ctx context.Context) ([]berth.SessionChange, error) {
	for {
		msg, err := s.next(ctx)
		if errors.Is(err, io.EOF) {
			// The stream has no end: any end of the body is a cut.
			err = berth.Errorf(berth.EUnavailable, "the session stream from %s was cut", s.c.target)
		}
		if err != nil {
			return nil, err
		}
		if msg.event == "error" {
			return nil, s.fail(decodeErrorEvent(msg.data))
		}
		if !msg.hasID || msg.event == "" {
			continue
		}
		s.last = msg.id
		s.progressed = true
		return []berth.SessionChange{{ID: msg.id, Type: msg.event, Data: json.RawMessage(bytes.Clone(msg.data))}}, nil
	}
}

// Changes is StreamChanges as an iterator: it yields (zero, err) once and
// ends on an error that reconnecting cannot cure, the end of ctx included.
// Breaking out of the loop closes the stream.
func (c *Client) Changes(ctx context.Context, lastEventID string) iter.Seq2[berth.SessionChange, error] {
	return func(yield func(berth.SessionChange, error) bool) {
		st, err := c.StreamChanges(ctx, lastEventID)
		if err != nil {
			yield(berth.SessionChange{}, err)
			return
		}
		defer st.Close()
		for {
			chs, err := st.Next(ctx)
			if err != nil {
				yield(berth.SessionChange{}, err)
				return
			}
			for _, ch := range chs {
				if !yield(ch, nil) {
					return
				}
			}
		}
	}
}

// follower reads one SSE stream over as many connections as it takes: it
// reconnects after a cut, waiting between attempts, until an error that a
// reconnection cannot cure or too many failures in a row (a connection
// that delivered something resets the count). It starts no goroutine: a
// call's context ends a blocked read by closing the connection.
type follower struct {
	c *Client
	// ctx bounds the stream; cancel ends it (Close).
	ctx    context.Context
	cancel context.CancelFunc
	// open sends the request of one connection, from the stream's position.
	open func(ctx context.Context) (*http.Response, error)
	// endable says the daemon may end the stream (": end" then EOF).
	endable bool

	// body and r are the current connection (nil between connections);
	// connCancel ends it.
	body       io.ReadCloser
	connCancel context.CancelFunc
	r          *sseReader
	// watched is the context whose end ends the connection (the last
	// call's); unwatch stops that.
	watched context.Context
	unwatch func() bool
	// progressed is set by the stream once the connection delivered.
	progressed bool
	failures   int
	delay      time.Duration
	// err, once set, is what every later call returns.
	err error
}

// newFollower returns a follower bounded by ctx; it connects on first use.
func (c *Client) newFollower(ctx context.Context, endable bool, open func(context.Context) (*http.Response, error)) *follower {
	fctx, cancel := context.WithCancel(ctx)
	return &follower{c: c, ctx: fctx, cancel: cancel, open: open, endable: endable, delay: c.reconnectDelay}
}

// Close releases the stream's connection; later calls fail.
func (f *follower) Close() {
	f.cancel()
	f.drop()
	if f.err == nil {
		f.err = berth.Errorf(berth.EInvalid, "the stream is closed")
	}
}

// fail makes err the stream's last word.
func (f *follower) fail(err error) error {
	f.drop()
	f.err = err
	return err
}

// drop closes the current connection, if any.
func (f *follower) drop() {
	if f.unwatch != nil {
		f.unwatch()
		f.watched, f.unwatch = nil, nil
	}
	if f.body != nil {
		f.body.Close()
		f.connCancel()
		f.body, f.r, f.connCancel = nil, nil, nil
	}
}

// connect opens a connection unless one is open; an error that a
// reconnection could cure is returned as it is, for next to retry.
func (f *follower) connect(ctx context.Context) error {
	if f.body != nil {
		return nil
	}
	cctx, cancel := context.WithCancel(f.ctx)
	stop := context.AfterFunc(ctx, cancel)
	resp, err := f.open(cctx)
	stop()
	if err != nil {
		cancel()
		return f.ctxErr(ctx, err)
	}
	f.body, f.connCancel, f.progressed = resp.Body, cancel, false
	f.r = &sseReader{br: bufio.NewReaderSize(resp.Body, 64<<10)}
	return nil
}

// ctxErr returns the error of whichever context ended, else err.
func (f *follower) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if f.ctx.Err() != nil {
		return f.ctx.Err()
	}
	return err
}

// next returns the next SSE message, reconnecting as needed; io.EOF when
// the daemon ended the stream.
func (f *follower) next(ctx context.Context) (sseMessage, error) {
	for {
		if f.err != nil {
			return sseMessage{}, f.err
		}
		// A connection that an earlier call's context ended is of no use.
		if f.watched != nil && f.watched != ctx && f.watched.Err() != nil {
			f.drop()
		}
		err := f.connect(ctx)
		if err == nil {
			var msg sseMessage
			if msg, err = f.read(ctx); err == nil {
				return msg, nil
			}
		}
		if ctx.Err() != nil || f.ctx.Err() != nil {
			// The caller's end: the stream may be read again (it reconnects).
			f.drop()
			return sseMessage{}, f.ctxErr(ctx, err)
		}
		// Only a daemon that cannot be reached, or dropped the stream, is
		// worth another try; a refusal (not found, unauthenticated) is final.
		if berth.ErrorCode(err) != berth.EUnavailable {
			return sseMessage{}, f.fail(err)
		}
		progressed := f.progressed
		f.drop()
		if progressed {
			f.failures, f.delay = 0, f.c.reconnectDelay
		}
		f.failures++
		if f.failures > f.c.maxReconnects {
			return sseMessage{}, f.fail(err)
		}
		t := time.NewTimer(f.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return sseMessage{}, ctx.Err()
		case <-f.ctx.Done():
			t.Stop()
			return sseMessage{}, f.ctx.Err()
		case <-t.C:
		}
		f.delay = min(2*f.delay, f.c.maxReconnectDelay)
	}
}

// read returns the next message of the open connection; a blocked read
// ends with ctx. The daemon's end of the stream is a final io.EOF; any
// other end of the body is EUnavailable (a cut, to reconnect after).
func (f *follower) read(ctx context.Context) (sseMessage, error) {
	// One watch per connection and context, not per read: a caller that
	// reads with the same context does not pay for it again.
	if ctx != f.watched {
		if f.unwatch != nil {
			f.unwatch()
		}
		f.watched, f.unwatch = ctx, context.AfterFunc(ctx, f.connCancel)
	}
	msg, err := f.r.next()
	switch {
	case err == nil:
		return msg, nil
	case ctx.Err() != nil:
		return sseMessage{}, ctx.Err()
	case errors.Is(err, io.EOF) && f.r.ended && f.endable:
		// The daemon ended the response after the whole log.
		return sseMessage{}, f.fail(io.EOF)
	case errors.Is(err, io.EOF):
		// Ended without the daemon's word (a proxy closed it): reconnect.
		return sseMessage{}, berth.Errorf(berth.EUnavailable, "the event stream from %s ended early", f.c.target)
	}
	return sseMessage{}, berth.WrapError(berth.EUnavailable, err, "the event stream from %s was cut", f.c.target)
}

// decodeErrorEvent turns the data of an "error" event into a *berth.Error.
func decodeErrorEvent(data []byte) error {
	var body errorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Code == "" {
		return berth.Errorf(berth.EInternal, "the event stream failed")
	}
	e := &berth.Error{Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details}
	if len(e.Details) == 0 {
		e.Details = nil
	}
	return e
}

// sseMessage is one dispatched Server-Sent Event.
type sseMessage struct {
	id    string
	hasID bool
	event string
	data  []byte
}

// sseReader parses a text/event-stream body.
type sseReader struct {
	br *bufio.Reader
	// ended is set when the server's end-of-log comment was read.
	ended bool
}

// next returns the next message that has data, skipping comments. It
// returns io.EOF at a clean end of the body; a message cut by the end is
// dropped, as the SSE specification says.
func (r *sseReader) next() (sseMessage, error) {
	var (
		msg     sseMessage
		data    bytes.Buffer
		hasData bool
	)
	for {
		line, err := r.readLine()
		if err != nil {
			return sseMessage{}, err
		}
		if len(line) == 0 {
			if hasData {
				msg.data = data.Bytes()
				return msg, nil
			}
			msg = sseMessage{}
			continue
		}
		if line[0] == ':' {
			if string(line) == endComment {
				r.ended = true
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			msg.id, msg.hasID = string(value), true
		case "event":
			msg.event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
}

// readLine returns the next line without its line ending.
func (r *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxSSELine {
			return nil, errors.New("SSE line too long")
		}
		if !isPrefix {
			return line, nil
		}
	}
}
