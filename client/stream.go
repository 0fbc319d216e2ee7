package http

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

// StreamEvents follows a session's log from after on: the stored events,
// then the live ones, in seq order. The sequence ends when the daemon ends
// the stream (the session is stopped and every event was read). On an error
// it yields (zero Event, err) once and ends; the end of ctx is such an
// error. A dropped connection is not: the client reconnects with
// Last-Event-ID set to the last seq it yielded, so nothing is missed and
// nothing repeats, and gives up with EUnavailable only after several failed
// attempts in a row.
func (c *Client) StreamEvents(ctx context.Context, id string, after int64) iter.Seq2[berth.Event, error] {
	return func(yield func(berth.Event, error) bool) {
		var decodeErr error
		err := c.follow(ctx, id, after, func(_ int64, data []byte) bool {
			var ev berth.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				decodeErr = berth.WrapError(berth.EInternal, err, "the daemon sent an event that is not valid JSON")
				return false
			}
			return yield(ev, nil)
		})
		if decodeErr != nil {
			err = decodeErr
		}
		if err != nil {
			yield(berth.Event{}, err)
		}
	}
}

// StreamEventsRaw is StreamEvents yielding each event's JSON exactly as the
// daemon sent it (for `-o json`).
func (c *Client) StreamEventsRaw(ctx context.Context, id string, after int64) iter.Seq2[json.RawMessage, error] {
	return func(yield func(json.RawMessage, error) bool) {
		err := c.follow(ctx, id, after, func(_ int64, data []byte) bool {
			return yield(json.RawMessage(bytes.Clone(data)), nil)
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// follow streams a session's events to fn, reconnecting after a dropped
// connection, until the stream ends (nil), fn returns false (nil), or an
// error that a reconnection cannot cure.
func (c *Client) follow(ctx context.Context, id string, after int64, fn func(seq int64, data []byte) bool) error {
	return c.reconnect(ctx, func() (bool, bool, error) { return c.streamOnce(ctx, id, &after, fn) })
}

// reconnect calls once, one SSE connection each time, until it reports the
// stream over, or an error that a reconnection cannot cure, or too many
// failures in a row (a connection that delivered something resets the
// count). Between attempts it waits, doubling the delay.
func (c *Client) reconnect(ctx context.Context, once func() (progressed, done bool, err error)) error {
	failures := 0
	delay := c.reconnectDelay
	for {
		progressed, done, err := once()
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Only a daemon that cannot be reached, or dropped the stream, is
		// worth another try; a refusal (not found, unauthenticated) is final.
		if berth.ErrorCode(err) != berth.EUnavailable {
			return err
		}
		if progressed {
			failures, delay = 0, c.reconnectDelay
		}
		failures++
		if failures > c.maxReconnects {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, c.maxReconnectDelay)
	}
}

// streamOnce reads one SSE connection. It reports whether any event was
// delivered, whether the stream is over (ended by the daemon or by fn), and
// the error that ended the connection otherwise. *after follows the last
// seq delivered.
func (c *Client) streamOnce(ctx context.Context, id string, after *int64, fn func(int64, []byte) bool) (progressed, done bool, err error) {
	header := http.Header{
		"Accept":        {"text/event-stream"},
		"Last-Event-Id": {strconv.FormatInt(*after, 10)},
	}
	resp, err := c.send(ctx, http.MethodGet, sessionPath(id, "/events/stream"), nil, nil, header)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	r := sseReader{br: bufio.NewReaderSize(resp.Body, 64<<10)}
	for {
		msg, err := r.next()
		if errors.Is(err, io.EOF) && r.ended {
			// The daemon ended the response after the whole log.
			return progressed, true, nil
		}
		if errors.Is(err, io.EOF) {
			// Ended without the daemon's word (a proxy closed it): reconnect.
			return progressed, false, berth.Errorf(berth.EUnavailable, "the event stream from %s ended early", c.target)
		}
		if err != nil {
			if ctx.Err() != nil {
				return progressed, false, ctx.Err()
			}
			return progressed, false, berth.WrapError(berth.EUnavailable, err, "the event stream from %s was cut", c.target)
		}
		if msg.event == "error" {
			return progressed, false, decodeErrorEvent(msg.data)
		}
		if !msg.hasID {
			continue
		}
		seq, perr := strconv.ParseInt(msg.id, 10, 64)
		if perr != nil {
			return progressed, false, berth.WrapError(berth.EInternal, perr, "the daemon sent an event with a bad id %q", msg.id)
		}
		// A reconnection never repeats an event, but guard the promise anyway.
		if seq <= *after {
			continue
		}
		*after = seq
		progressed = true
		if !fn(seq, msg.data) {
			return true, true, nil
		}
	}
}

// StreamChanges follows the changes of every session (GET /v1/events/stream)
// from lastEventID on ("" for the next change). Each change is yielded with
// its Session JSON in Data; a resync change means the caller must list the
// sessions again. A dropped connection is not an error: the client
// reconnects with Last-Event-ID set to the last id it yielded, so nothing
// is missed and nothing repeats while the daemon runs (after a daemon
// restart the first change is a resync). It yields (zero, err) once and
// ends on an error that reconnecting cannot cure, the end of ctx included.
func (c *Client) StreamChanges(ctx context.Context, lastEventID string) iter.Seq2[berth.SessionChange, error] {
	return func(yield func(berth.SessionChange, error) bool) {
		err := c.reconnect(ctx, func() (bool, bool, error) {
			return c.changesOnce(ctx, &lastEventID, func(ch berth.SessionChange) bool { return yield(ch, nil) })
		})
		if err != nil {
			yield(berth.SessionChange{}, err)
		}
	}
}

// changesOnce reads one connection of the all-sessions stream; *last
// follows the id of the last change delivered.
func (c *Client) changesOnce(ctx context.Context, last *string, fn func(berth.SessionChange) bool) (progressed, done bool, err error) {
	header := http.Header{"Accept": {"text/event-stream"}}
	if *last != "" {
		header.Set("Last-Event-Id", *last)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/events/stream", nil, nil, header)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	r := sseReader{br: bufio.NewReaderSize(resp.Body, 64<<10)}
	for {
		msg, err := r.next()
		if err != nil {
			if ctx.Err() != nil {
				return progressed, false, ctx.Err()
			}
			// The stream has no end: any end of the body is a cut.
			return progressed, false, berth.WrapError(berth.EUnavailable, err, "the session stream from %s was cut", c.target)
		}
		if msg.event == "error" {
			return progressed, false, decodeErrorEvent(msg.data)
		}
		if !msg.hasID || msg.event == "" {
			continue
		}
		*last = msg.id
		progressed = true
		if !fn(berth.SessionChange{ID: msg.id, Type: msg.event, Data: json.RawMessage(bytes.Clone(msg.data))}) {
			return true, true, nil
		}
	}
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
