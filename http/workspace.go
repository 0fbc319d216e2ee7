package http

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// workspaceService is what the routes of a session's workspace and its
// history call: exec, snapshots, checkpoints, rewind and fork.
type workspaceService interface {
	berth.CheckpointService
	Exec(ctx context.Context, id string, req berth.ExecRequest) (*berth.ExecResult, error)
	CreateSnapshot(ctx context.Context, id string) (*berth.Snapshot, error)
	ListSnapshots(ctx context.Context, id string) ([]*berth.Snapshot, error)
}

// workspace serves a session's workspace: commands run in its sandbox,
// its snapshots, and its checkpoints with rewind and fork (checkpoints.go).
type workspace struct {
	*edge
	svc workspaceService
}

// handleExec answers POST /v1/sessions/{id}/exec with the command's result.
func (h *workspace) handleExec(w http.ResponseWriter, r *http.Request) {
	callWithBody(h.edge, w, r, http.StatusOK, h.svc.Exec, (*berth.ExecRequest).Validate)
}

// snapshotList is the answer of GET /v1/sessions/{id}/snapshots.
type snapshotList struct {
	Snapshots []*berth.Snapshot `json:"snapshots"`
}

// handleCreateSnapshot answers POST /v1/sessions/{id}/snapshots with 201.
func (h *workspace) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := h.svc.CreateSnapshot(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusCreated, snap, err)
}

// handleListSnapshots answers GET /v1/sessions/{id}/snapshots.
func (h *workspace) handleListSnapshots(w http.ResponseWriter, r *http.Request) {
	snaps, err := h.svc.ListSnapshots(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusOK, snapshotList{Snapshots: orEmpty(snaps)}, err)
}
