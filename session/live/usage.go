package live

import "github.com/berth-sh/berth"

// SetUsage takes u, the session's usage as the store has it after a model
// call (docs/api.md, "Usage and budgets"), unless the session already
// shows a later one: calls told out of order never move it back. The
// badge follows (over_budget).
func (ls *Session) SetUsage(u berth.Usage) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !laterUsage(u, ls.sess.Usage) {
		return
	}
	ls.sess.Usage = u
	ls.changedLocked()
}

// laterUsage reports whether u counts at least as many calls as cur, its
// own and its tree's: usage only grows, so that is the later one.
func laterUsage(u, cur berth.Usage) bool {
	return u.ModelCalls >= cur.ModelCalls && u.Total().ModelCalls >= cur.Total().ModelCalls
}
