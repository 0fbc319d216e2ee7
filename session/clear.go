package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// ClearSession implements berth.SessionService: the agent starts a new
// conversation (session/new) in the same workspace, sandbox and settings;
// pending input is canceled; the log goes on with conversation_cleared.
// A turn in flight is EConflict unless cancel, which cancels it first.
// EConflict when the session is not active, EUnavailable when the agent
// cannot start the new conversation (the old one stays), ENotFound.
func (m *Manager) ClearSession(ctx context.Context, id string, cancel bool) (*berth.Session, error) {
	ls, err := m.handshaken(ctx, id, "there is no conversation to clear")
	if err != nil {
		return nil, err
	}
	return ls.Clear(ctx, cancel)
}
