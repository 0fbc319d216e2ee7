package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
)

// endComment is the SSE comment that ends the stream of a stopped session
// once every event was sent; a stream that ends without it was cut.
const endComment = ": end"

// handleStreamEvents answers GET /v1/sessions/{id}/events/stream with
// Server-Sent Events: every event after the position given by Last-Event-ID
// (which wins) or ?after=, then the live ones, each as
// "id: <seq>\nevent: <type>\ndata: <Event JSON>\n\n". A ": ping" comment
// goes out when nothing else did for the ping interval. The response ends
// with the comment ": end" when the stream says io.EOF (a stopped session,
// fully read). When the server shuts down the connection is dropped rather
// than ended, so that a client knows to reconnect with Last-Event-ID rather
// than think the log complete.
func (h *events) handleStreamEvents(w http.ResponseWriter, r *http.Request) {
	after, err := streamPosition(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	open := func(ctx context.Context) (batches[berth.Event], error) {
		return h.svc.StreamEvents(ctx, r.PathValue("id"), after)
	}
	serveSSE(h, w, r, open, sseFeed[berth.Event]{write: writeEvent, ends: true, failed: "event stream failed"})
}

// batches is what an SSE stream follows: a session's log
// (berth.EventStream) or every session's changes (berth.ChangeStream).
type batches[T any] interface {
	Next(ctx context.Context) ([]T, error)
	Close()
}

// sseFeed is what sets one SSE stream apart from the other.
type sseFeed[T any] struct {
	// write writes one item as an SSE event.
	write func(io.Writer, T) error
	// ends is true when Next says io.EOF once everything was read: the
	// response then ends with endComment.
	ends bool
	// failed is the log message of a read that failed mid-stream.
	failed string
}

// serveSSE opens a stream (open, under a context that ends with the request
// or when the daemon shuts down) and writes what it yields as Server-Sent
// Events until the client goes, the stream ends or fails, or the daemon
// shuts down; see handleStreamEvents and handleStreamChanges for what each
// end looks like on the wire.
func serveSSE[T any](h *events, w http.ResponseWriter, r *http.Request, open func(context.Context) (batches[T], error), feed sseFeed[T]) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	stream, err := open(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	defer stream.Close()

	rc, err := beginSSE(w)
	if err != nil {
		return
	}
	for {
		next, cancelNext := context.WithTimeout(ctx, h.pingInterval)
		items, err := stream.Next(next)
		cancelNext()
		if h.signedOut(r) {
			// Logged out or expired: cut, so the client signs in again.
			panic(http.ErrAbortHandler)
		}
		// A reader that stops reading is cut after the write timeout rather
		// than holding this handler (and a shutdown) forever; it resumes
		// with Last-Event-ID (the all-sessions stream with a resync if the
		// changes it missed are gone).
		_ = rc.SetWriteDeadline(time.Now().Add(h.writeTimeout))
		for _, it := range items {
			if werr := feed.write(w, it); werr != nil {
				// Cut, not ended: a clean end would tell the client the log is complete.
				panic(http.ErrAbortHandler)
			}
		}
		switch {
		case err == nil:
		case feed.ends && errors.Is(err, io.EOF):
			// Say that the log is complete, so a clean close by a proxy is
			// not taken for it.
			io.WriteString(w, endComment+"\n\n")
			rc.Flush()
			return
		case ctx.Err() != nil:
			if h.shuttingDown() && r.Context().Err() == nil {
				rc.Flush()
				// Drop the connection: the stream did not end, the daemon did.
				panic(http.ErrAbortHandler)
			}
			return
		case errors.Is(err, context.DeadlineExceeded):
			if _, werr := io.WriteString(w, ": ping\n\n"); werr != nil {
				return
			}
		default:
			// The response has begun: say what went wrong as an error event
			// (it has no id, so the client's position is unchanged), then end.
			h.logError(r, feed.failed, err)
			writeErrorEvent(w, err)
			rc.Flush()
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// streamPosition returns the seq a stream starts after: Last-Event-ID when
// present, else ?after=, else 0.
func streamPosition(r *http.Request) (int64, error) {
	if raw := strings.TrimSpace(r.Header.Get("Last-Event-ID")); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return 0, &berth.Error{Code: berth.EInvalid,
				Message: fmt.Sprintf("header Last-Event-ID must be a non-negative integer, not %q", raw),
				Details: map[string]any{"header": "Last-Event-ID"}}
		}
		return n, nil
	}
	return queryInt(r.URL.Query(), "after", 0, 0)
}

// writeEvent writes one event in SSE form. json.Marshal writes the event
// on one line: it escapes newlines in strings and compacts raw data.
func writeEvent(w io.Writer, ev berth.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// One write per event, put together by hand: the stream's hot path.
	typ := oneLine(ev.Type)
	b := make([]byte, 0, len(data)+len(typ)+48)
	b = strconv.AppendInt(append(b, "id: "...), ev.Seq, 10)
	b = append(append(b, "\nevent: "...), typ...)
	b = append(append(b, "\ndata: "...), data...)
	_, err = w.Write(append(b, "\n\n"...))
	return err
}

// writeErrorEvent writes err as an "error" event carrying the API's error
// JSON.
func writeErrorEvent(w io.Writer, err error) {
	data, merr := json.Marshal(errorBody{Error: errorObjectOf(err)})
	if merr != nil {
		return
	}
	fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
}

// lineBreaks removes line breaks (oneLine).
var lineBreaks = strings.NewReplacer("\r", "", "\n", "")

// oneLine removes line breaks, which would end an SSE field early. A
// string without any (every event type berth writes) is returned as it
// is: this runs for every event of every stream.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return lineBreaks.Replace(s)
}

// beginSSE answers 200 with the headers of an event stream and flushes
// them, so the client knows the stream is open before the first event.
func beginSSE(w http.ResponseWriter) (*http.ResponseController, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// Tell proxies such as nginx not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return rc, rc.Flush()
}
