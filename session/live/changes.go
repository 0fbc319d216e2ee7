package live

import (
	"bytes"
	"encoding/json"

	"github.com/berth-sh/berth"
)

// PublishIfFree publishes the session's changes unless its lock is busy;
// it reports whether it could look.
func (ls *Session) PublishIfFree() bool {
	if !ls.mu.TryLock() {
		return false
	}
	ls.changedLocked()
	ls.mu.Unlock()
	return true
}

// Publish publishes the session as typ (see publishLocked).
func (ls *Session) Publish(typ string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.publishLocked(typ)
}

// changedLocked publishes the session as it is now, as session_updated,
// unless it is exactly what was last published. Every change of what the
// Session JSON shows calls it with ls.mu held; calling it when nothing
// changed costs one marshal and publishes nothing.
func (ls *Session) changedLocked() { ls.publishLocked(berth.ChangeSessionUpdated) }

// publishLocked publishes the session as typ when its JSON differs from
// the last one published. The JSON is built once, here, and shared by
// every reader.
func (ls *Session) publishLocked(typ string) {
	if ls.detached.Load() {
		// The next daemon owns the session's changes.
		return
	}
	data, err := json.Marshal(ls.viewLocked())
	if err != nil {
		ls.logger.Error("session not published", "err", err)
		return
	}
	if bytes.Equal(data, ls.published) {
		return
	}
	ls.published = data
	ls.h.Publish(typ, data)
	if ls.h.Changed != nil {
		ls.h.Changed(ls)
	}
}
