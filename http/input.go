package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// statusResult is a bare {"status"} answer.
type statusResult struct {
	Status string `json:"status"`
}

// handleListQueue answers GET /v1/sessions/{id}/queue.
func (s *Server) handleListQueue(w http.ResponseWriter, r *http.Request) {
	q, err := s.svc.ListQueue(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if q.Entries == nil {
		q.Entries = []*berth.QueueEntry{}
	}
	writeJSON(w, http.StatusOK, q)
}

// handleCancelQueueEntry answers DELETE /v1/sessions/{id}/queue/{entry}.
func (s *Server) handleCancelQueueEntry(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.CancelQueueEntry(r.Context(), r.PathValue("id"), r.PathValue("entry")); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, statusResult{Status: "canceled"})
}

// permissionList is the answer of GET /v1/sessions/{id}/permissions.
type permissionList struct {
	Permissions []*berth.Permission `json:"permissions"`
}

// handleListPermissions answers GET /v1/sessions/{id}/permissions?state=.
func (s *Server) handleListPermissions(w http.ResponseWriter, r *http.Request) {
	ps, err := s.svc.ListPermissions(r.Context(), r.PathValue("id"), r.URL.Query().Get("state"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if ps == nil {
		ps = []*berth.Permission{}
	}
	writeJSON(w, http.StatusOK, permissionList{Permissions: ps})
}

// handleDecidePermission answers POST /v1/sessions/{id}/permissions/{perm}.
func (s *Server) handleDecidePermission(w http.ResponseWriter, r *http.Request) {
	var d berth.PermissionDecision
	if err := s.decodeJSON(w, r, &d); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := d.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.svc.DecidePermission(r.Context(), r.PathValue("id"), r.PathValue("perm"), d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// handleResume answers POST /v1/sessions/{id}/resume with the active session.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	sess, err := s.svc.ResumeSession(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleExec answers POST /v1/sessions/{id}/exec with the command's result.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req berth.ExecRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.Exec(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// snapshotList is the answer of GET /v1/sessions/{id}/snapshots.
type snapshotList struct {
	Snapshots []*berth.Snapshot `json:"snapshots"`
}

// handleCreateSnapshot answers POST /v1/sessions/{id}/snapshots with 201.
func (s *Server) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.svc.CreateSnapshot(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, snap)
}

// handleListSnapshots answers GET /v1/sessions/{id}/snapshots.
func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request) {
	snaps, err := s.svc.ListSnapshots(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if snaps == nil {
		snaps = []*berth.Snapshot{}
	}
	writeJSON(w, http.StatusOK, snapshotList{Snapshots: snaps})
}

// handleRepair answers POST /v1/sessions/{id}/repair?dry_run=&force=.
func (s *Server) handleRepair(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dryRun, err := queryBool(q, "dry_run")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	force, err := queryBool(q, "force")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.svc.Repair(r.Context(), r.PathValue("id"), dryRun, force)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
