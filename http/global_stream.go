package http

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// handleStreamChanges answers GET /v1/events/stream: the changes of every
// session as Server-Sent Events, "id: <epoch>-<seq>\nevent: <type>\ndata:
// <Session JSON>\n\n", from the position in Last-Event-ID (which wins) or
// ?after= (for clients that cannot set headers), or from the next
// change when neither is given. A ": ping" comment goes out when nothing
// else did for the ping interval. The stream never ends by itself; when the
// server shuts down the connection is dropped, so the client reconnects.
func (h *events) handleStreamChanges(w http.ResponseWriter, r *http.Request) {
	last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if last == "" {
		last = strings.TrimSpace(r.URL.Query().Get("after"))
	}
	open := func(ctx context.Context) (batches[berth.SessionChange], error) {
		return h.svc.StreamChanges(ctx, last)
	}
	serveSSE(h, w, r, open, sseFeed[berth.SessionChange]{write: writeChange, failed: "session change stream failed"})
}

// writeChange writes one session change in SSE form.
func writeChange(w io.Writer, c berth.SessionChange) error {
	_, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", oneLine(c.ID), oneLine(c.Type), c.Data)
	return err
}
