package session

import (
	"context"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// Authenticate implements berth.SessionService: ACP authenticate with one
// of the agent's auth methods. A session waiting in starting for it then
// opens its conversation and becomes active (or, asked again, keeps
// waiting). EInvalid for a method the agent does not offer (naming those
// it does) or one the agent refuses; EConflict when the session is not
// live or still handshaking; ENotFound.
func (m *Manager) Authenticate(ctx context.Context, id, methodID string) (*berth.Session, error) {
	ls, err := m.handshaken(ctx, id, "resume it, then authenticate")
	if err != nil {
		return nil, err
	}
	return ls.Authenticate(ctx, methodID)
}

// handshaken returns the live session of session id once its
// handshake is over. A session with none (stopped) is EConflict, its
// message saying what to do (ifStopped); ENotFound.
func (m *Manager) handshaken(ctx context.Context, id, ifStopped string) (*live.Session, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		return nil, berth.Errorf(berth.EConflict, "session is %s: %s", s.State, ifStopped)
	}
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}
