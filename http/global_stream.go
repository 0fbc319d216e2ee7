package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// handleStreamChanges answers GET /v1/events/stream: the changes of every
// session as Server-Sent Events, "id: <epoch>-<seq>\nevent: <type>\ndata:
// <Session JSON>\n\n", from the position in Last-Event-ID (which wins) or
// ?after= (for clients that cannot set headers), or from the next
// change when neither is given. A ": ping" comment goes out when nothing
// else did for the ping interval. The stream never ends by itself; when the
// server shuts down the connection is dropped, so the client reconnects.
func (s *Server) handleStreamChanges(w http.ResponseWriter, r *http.Request) {
	last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if last == "" {
		last = strings.TrimSpace(r.URL.Query().Get("after"))
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	stream, err := s.svc.StreamChanges(ctx, last)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer stream.Close()

	rc, err := beginSSE(w)
	if err != nil {
		return
	}
	for {
		next, cancelNext := context.WithTimeout(ctx, s.pingInterval)
		changes, err := stream.Next(next)
		cancelNext()
		if s.signInEnded(r) {
			// Logged out or expired: cut, so the client signs in again.
			panic(http.ErrAbortHandler)
		}
		// A reader that stops reading is cut after the write timeout rather
		// than holding this handler forever; it resumes with Last-Event-ID
		// (and gets a resync if the changes it missed are gone).
		_ = rc.SetWriteDeadline(time.Now().Add(s.writeTimeout()))
		for _, c := range changes {
			if _, werr := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", oneLine(c.ID), oneLine(c.Type), c.Data); werr != nil {
				panic(http.ErrAbortHandler)
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			if s.shuttingDown() && r.Context().Err() == nil {
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
			s.logError(r, "session change stream failed", err)
			writeErrorEvent(w, err)
			rc.Flush()
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
