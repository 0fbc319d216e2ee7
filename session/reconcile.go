package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/berth-sh/berth"
)

// reconcile finds sessions a previous daemon left live. Their agents died
// with it (the per-session shim that keeps them alive comes later), so each
// becomes stopped/daemon_crashed: a leftover process group is killed, an open
// turn gets its closing turn_ended, and session_stopped is appended. No
// session reads active with nothing behind it.
func (m *Manager) reconcile(ctx context.Context) error {
	for _, state := range []berth.State{berth.StateStarting, berth.StateActive, berth.StateStopping} {
		for {
			page, err := m.store.ListSessions(ctx, berth.SessionFilter{State: state, Limit: 1000})
			if err != nil {
				return fmt.Errorf("reconcile: list %s sessions: %w", state, err)
			}
			for _, s := range page.Sessions {
				if err := m.reconcileOne(ctx, s); err != nil {
					return fmt.Errorf("reconcile %s: %w", s.ID, err)
				}
			}
			// Each reconciled session leaves the filter, so the first page is always the next.
			if len(page.Sessions) == 0 || page.NextCursor == "" {
				break
			}
		}
	}
	return nil
}

// reconcileOne closes one session found live at boot.
func (m *Manager) reconcileOne(ctx context.Context, s *berth.Session) error {
	if s.AgentPID > 0 && processOfSession(s.AgentPID, s.ID) {
		m.logger.Warn("killing an agent left by a previous daemon", "session", s.ID, "pgid", s.AgentPID)
		_ = syscall.Kill(-s.AgentPID, syscall.SIGKILL)
	}
	open, err := m.openTurn(ctx, s.ID)
	if err != nil {
		return err
	}
	if open != "" {
		_, err := m.log.AppendSync(ctx, berth.NewEvent(s.ID, open, berth.EventTurnEnded, turnEndedData{
			StopReason: berth.TurnError,
			Error:      &berth.ACPError{Code: "daemon_crashed", Message: "the daemon stopped during the turn"}}))
		if err != nil {
			return err
		}
	}
	f := &berth.Failure{Kind: berth.FailInternal, Message: "the daemon stopped while the session was " + string(s.State)}
	ended, err := m.endsStopped(ctx, s.ID)
	if err != nil {
		return err
	}
	// A daemon that logged session_stopped but died before recording the
	// state leaves the log complete already.
	if !ended {
		if _, err := m.log.AppendSync(ctx, berth.NewEvent(s.ID, "", berth.EventSessionStopped,
			map[string]any{"stop_reason": berth.StopDaemonCrashed, "failure": f})); err != nil {
			return err
		}
	}
	from := s.State
	s.State, s.StopReason, s.Failure, s.AgentPID = berth.StateStopped, berth.StopDaemonCrashed, f, 0
	s.Resumable = workspaceExists(s.Workspace)
	s.Badge = s.ComputeBadge(false, false)
	return m.store.UpdateSession(ctx, s, from)
}

// endsStopped reports whether a session's log ends with session_stopped.
func (m *Manager) endsStopped(ctx context.Context, id string) (bool, error) {
	last, err := m.store.LastSeq(ctx, id)
	if err != nil || last == 0 {
		return false, err
	}
	evs, err := m.store.ListEvents(ctx, id, berth.EventFilter{After: last - 1, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(evs) == 1 && evs[0].Type == berth.EventSessionStopped, nil
}

// openTurn returns the id of the session's last turn if it never ended.
func (m *Manager) openTurn(ctx context.Context, id string) (string, error) {
	started, err := m.lastOfType(ctx, id, berth.EventTurnStarted)
	if err != nil || started == nil {
		return "", err
	}
	ended, err := m.store.ListEvents(ctx, id, berth.EventFilter{After: started.Seq, Type: berth.EventTurnEnded, TurnID: started.TurnID, Limit: 1})
	if err != nil || len(ended) > 0 {
		return "", err
	}
	return started.TurnID, nil
}

// lastOfType returns the last event of a type, paging forward through that
// type's index.
func (m *Manager) lastOfType(ctx context.Context, id, typ string) (*berth.Event, error) {
	var last *berth.Event
	after := int64(0)
	for {
		evs, err := m.store.ListEvents(ctx, id, berth.EventFilter{After: after, Type: typ, Limit: berth.MaxEventLimit})
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return last, nil
		}
		last = &evs[len(evs)-1]
		after = last.Seq
	}
}

// processOfSession reports whether pid is alive and was started for this
// session (its environment names it), so a reused pid is never killed.
func processOfSession(pid int, id string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	want := []byte("BERTH_SESSION_ID=" + id)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}
