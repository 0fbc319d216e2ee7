package live

import (
	"context"
	"strconv"

	"github.com/berth-sh/berth"
)

// SetMissingCredential records that the model gateway refused a call of
// the session's agent because the credential name is not set: the
// session shows auth.missing and the badge needs_auth, and a
// runtime_warning says how to set it (docs/api.md, The model gateway).
// name "" clears it (a later call went through). A session that stops
// is left as it is.
func (ls *Session) SetMissingCredential(ctx context.Context, name string) {
	ls.mu.Lock()
	defer ls.unlock()
	if ls.exited || ls.stopReason != "" {
		return
	}
	cur := ""
	if ls.sess.Auth != nil {
		cur = ls.sess.Auth.Missing
	}
	state := ls.sess.State
	if cur == name || state != berth.StateActive && state != berth.StateStarting {
		return
	}
	err := ls.saveLocked(ctx, state, func(s *berth.Session) {
		s.Auth = nil
		if name != "" {
			s.Auth = &berth.SessionAuth{Missing: name}
		}
	})
	if err != nil {
		ls.logger.Error("could not record a missing credential", "credential", name, "err", err)
		return
	}
	if name == "" {
		ls.logger.Info("the model gateway's credential is set again", "credential", cur)
		return
	}
	reason := "the model gateway has no credential " + strconv.Quote(name) + " for this agent's calls: berth credentials set " + name
	ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": reason, "credential": name})
	ls.logger.Warn("a model credential is not set: berth credentials set "+name, "credential", name)
}
