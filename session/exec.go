package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// Exec implements berth.SessionService: the command runs through the
// session's sandbox, in its workspace, with an empty stdin; at the deadline
// its whole process group is killed. Each exec is logged as an exec event.
func (m *Manager) Exec(ctx context.Context, id string, req berth.ExecRequest) (*berth.ExecResult, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
		return nil, berth.Errorf(berth.EConflict, "session is stopped: resume it to run commands in its sandbox")
	}
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	return ls.Exec(context.WithoutCancel(ctx), req)
}
