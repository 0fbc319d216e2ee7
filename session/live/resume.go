package live

import (
	"context"
	"os"

	"github.com/berth-sh/berth"
)

// Closing reports whether the session is on its way to stopped.
func (ls *Session) Closing() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.exited || ls.stopReason != ""
}

// LoadInput restores what a session had accepted but not run: the pending
// queue entries and the staged steer.
func (ls *Session) LoadInput(ctx context.Context) error {
	entries, err := ls.h.Store.ListQueue(ctx, ls.id)
	if err != nil {
		return err
	}
	ls.queue.take(entries)
	ls.mu.Lock()
	ls.changedLocked()
	ls.mu.Unlock()
	return nil
}

// Resumable says whether resuming a session can help: it is stopped, its
// workspace exists (or comes with it: moves, a session that moves here
// from another node), and its agent opened a conversation once. A
// session whose agent failed to start before that (startup_failed
// without an acp.session_id) has nothing to resume: a new session is the
// same thing.
func Resumable(s *berth.Session, moves bool) bool {
	if s.State != berth.StateStopped || !(moves || WorkspaceExists(s.Workspace)) {
		return false
	}
	return s.StopReason != berth.StopStartupFailed || s.ACP.SessionID != ""
}

// WorkspaceExists reports whether dir is an existing directory.
func WorkspaceExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
