package http

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
)

// eventService is what the routes of the event log call: a session's
// events, read or followed, its transcript, and every session's changes.
type eventService interface {
	ListEvents(ctx context.Context, id string, f berth.EventFilter) ([]berth.Event, error)
	StreamEvents(ctx context.Context, id string, after int64) (berth.EventStream, error)
	Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error)
	StreamChanges(ctx context.Context, lastEventID string) (berth.ChangeStream, error)
}

// events serves the event log (docs/api.md, Events): a session's events in
// pages or as a stream (sse.go), its transcript, and the all-sessions
// stream (global_stream.go).
type events struct {
	*edge
	svc eventService
	// pingInterval is how long a stream waits for events before it writes
	// a ping comment.
	pingInterval time.Duration
	// writeTimeout bounds each write of a stream to its client.
	writeTimeout time.Duration
	// signedOut reports whether the request's sign-in has ended since it
	// was let in (Server.signInEnded).
	signedOut func(*http.Request) bool
}

// eventPage is the answer of GET /v1/sessions/{id}/events.
type eventPage struct {
	Events    []berth.Event `json:"events"`
	NextAfter int64         `json:"next_after"`
}

// handleListEvents answers GET /v1/sessions/{id}/events?after=&limit=&type=
// &turn=. after is exclusive; limit defaults to 100 and a limit over 1000 is
// clamped to 1000 (a client that pages with next_after gets everything
// either way). next_after is the last seq returned, or after when none.
func (h *events) handleListEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := queryInt(q, "after", 0, 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	limit, err := queryInt(q, "limit", berth.DefaultEventLimit, 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	switch {
	case limit == 0:
		limit = berth.DefaultEventLimit
	case limit > berth.MaxEventLimit:
		limit = berth.MaxEventLimit
	}
	f := berth.EventFilter{After: after, Limit: int(limit), Type: q.Get("type"), TurnID: q.Get("turn")}
	events, err := h.svc.ListEvents(r.Context(), r.PathValue("id"), f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	page := eventPage{Events: events, NextAfter: after}
	if len(events) > 0 {
		page.NextAfter = events[len(events)-1].Seq
	} else {
		page.Events = []berth.Event{}
	}
	writeJSON(w, http.StatusOK, page)
}

// transcript is the answer of GET /v1/sessions/{id}/transcript.
type transcript struct {
	Turns []berth.TranscriptTurn `json:"turns"`
}

// handleTranscript answers GET /v1/sessions/{id}/transcript with
// {"turns":[…]}, written one turn at a time as the log is folded (when the
// service can hand turns over so): the answer is never held in memory
// whole, nor the turns it is made of.
func (h *events) handleTranscript(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n := 0
	// A failed write means the client is gone: the walk stops there.
	write := func(t *berth.TranscriptTurn) error {
		if n == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			if _, err := io.WriteString(w, `{"turns":[`); err != nil {
				return err
			}
		} else if _, err := io.WriteString(w, ","); err != nil {
			return err
		}
		n++
		if t.ToolCalls == nil {
			t.ToolCalls = []berth.TranscriptToolUse{}
		}
		out := *t
		out.Text, out.Long = "", nil
		if t.Long != nil {
			return encodeWithLong(r.Context(), w, &out, t.Long)
		}
		return encodeWithText(w, &out, t.Text)
	}
	var err error
	if st, ok := h.svc.(berth.TranscriptStreamer); ok {
		err = st.TranscriptEach(r.Context(), id, write)
	} else {
		var turns []berth.TranscriptTurn
		if turns, err = h.svc.Transcript(r.Context(), id); err == nil {
			for i := range turns {
				if err = write(&turns[i]); err != nil {
					break
				}
				// What is written is not needed any more.
				turns[i] = berth.TranscriptTurn{}
			}
		}
	}
	switch {
	case err != nil && n == 0:
		h.writeError(w, r, err)
	case err != nil:
		// Half written: the client sees the answer end early.
		h.log.Warn("transcript cut short", "session_id", id, "err", err)
	case n == 0:
		writeJSON(w, http.StatusOK, transcript{Turns: []berth.TranscriptTurn{}})
	default:
		_, _ = io.WriteString(w, "]}\n")
	}
}
