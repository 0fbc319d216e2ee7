package http

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// checkpointList is the answer of GET /v1/sessions/{id}/checkpoints.
type checkpointList struct {
	Checkpoints []*berth.Checkpoint `json:"checkpoints"`
}

// handleListCheckpoints answers GET /v1/sessions/{id}/checkpoints.
func (s *Server) handleListCheckpoints(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.ListCheckpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if list == nil {
		list = []*berth.Checkpoint{}
	}
	writeJSON(w, http.StatusOK, checkpointList{Checkpoints: list})
}

// handleRewind answers POST /v1/sessions/{id}/rewind with the session.
func (s *Server) handleRewind(w http.ResponseWriter, r *http.Request) {
	var req berth.RewindRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.Rewind(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleFork answers POST /v1/sessions/{id}/fork with 201 and the new
// session.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req berth.ForkRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}

// ListCheckpoints returns a session's checkpoints, oldest first.
func (c *Client) ListCheckpoints(ctx context.Context, id string) ([]*berth.Checkpoint, error) {
	var out checkpointList
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/checkpoints"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Checkpoints, nil
}

// Rewind restores a session's workspace to a checkpoint.
func (c *Client) Rewind(ctx context.Context, id string, req berth.RewindRequest) (*berth.Session, error) {
	var s berth.Session
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "/rewind"), nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fork creates a session from a checkpoint of another.
func (c *Client) Fork(ctx context.Context, id string, req berth.ForkRequest) (*berth.Session, error) {
	var s berth.Session
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "/fork"), nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
