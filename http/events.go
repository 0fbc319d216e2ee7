package http

import (
	"io"
	"net/http"

	"github.com/berth-sh/berth"
)

// eventPage is the answer of GET /v1/sessions/{id}/events.
type eventPage struct {
	Events    []berth.Event `json:"events"`
	NextAfter int64         `json:"next_after"`
}

// handleListEvents answers GET /v1/sessions/{id}/events?after=&limit=&type=
// &turn=. after is exclusive; limit defaults to 100 and a limit over 1000 is
// clamped to 1000 (a client that pages with next_after gets everything
// either way). next_after is the last seq returned, or after when none.
func (s *Server) handleListEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := queryInt(q, "after", 0, 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryInt(q, "limit", berth.DefaultEventLimit, 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case limit == 0:
		limit = berth.DefaultEventLimit
	case limit > berth.MaxEventLimit:
		limit = berth.MaxEventLimit
	}
	f := berth.EventFilter{After: after, Limit: int(limit), Type: q.Get("type"), TurnID: q.Get("turn")}
	events, err := s.svc.ListEvents(r.Context(), r.PathValue("id"), f)
	if err != nil {
		s.writeError(w, r, err)
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
// {"turns":[…]}, written one turn at a time: the answer is never held in
// memory whole next to the turns it is made of.
func (s *Server) handleTranscript(w http.ResponseWriter, r *http.Request) {
	turns, err := s.svc.Transcript(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// A failed write means the client is gone: stop there.
	if _, err := io.WriteString(w, `{"turns":[`); err != nil {
		return
	}
	for i := range turns {
		t := &turns[i]
		if t.ToolCalls == nil {
			t.ToolCalls = []berth.TranscriptToolUse{}
		}
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return
			}
		}
		text := t.Text
		t.Text = ""
		if encodeWithText(w, t, text) != nil || r.Context().Err() != nil {
			return
		}
		// What is written is not needed any more.
		*t = berth.TranscriptTurn{}
	}
	_, _ = io.WriteString(w, "]}\n")
}
