package live

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
)

// tree is a live session's side of its tree: its parent, and logClosed,
// guarded by the live session's mu, set just before the parent's
// session_stopped, after which nothing about a child enters its log.
//
// The manager serialises the admission of a parent's children against
// each other and against the parent's stop with the parent's tree lock
// (Manager.trees): a child is admitted, under it, only while the parent
// is not closing, and is live before it is released; the parent's stop,
// once closing, takes it before it lists the children to stop.
type tree struct {
	ls *Session
	// parent is the session's parent id ("" for a root); it never changes.
	parent    string
	logClosed bool
}

// LogAbout logs an event about another session (a child) in the
// session's log, tagged with its turn in flight, unless the log takes
// nothing more about others (the session is stopping); it reports whether
// it did.
func (ls *Session) LogAbout(typ string, data map[string]any) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.tree.logClosed {
		return false
	}
	ls.Emit(ls.turns.currentIDLocked(), typ, data)
	return true
}

// ParentID is the session's parent ("" for a root).
func (ls *Session) ParentID() string { return ls.tree.parent }

// stopChildren is the parent's side of its stop, run by its monitor before
// session_stopped: no child is admitted any more, every live child is
// stopped with parent_stopped (each stops its own the same way) and
// waited for, and then the log takes nothing more about children. While
// the daemon shuts down every session is being stopped anyway: the
// children are left to that.
func (tr *tree) stopChildren(ctx context.Context) {
	ls := tr.ls
	ls.h.Tree.StopChildren(ctx, ls.id)
	ls.mu.Lock()
	tr.logClosed = true
	ls.mu.Unlock()
}

// childStopped logs child_stopped, with the child's last agent message,
// in the parent's log; the child's monitor calls it once it is stopped.
func (tr *tree) childStopped(ctx context.Context, reason berth.StopReason) {
	ls := tr.ls
	if tr.parent == "" || !ls.h.Tree.ParentLive(tr.parent) {
		return
	}
	ls.h.Tree.ToParent(tr.parent, berth.EventChildStopped, map[string]any{
		"child_id": ls.id, "stop_reason": reason, "text": tr.lastMessage(ctx)})
}

// lastMessage is the text of the session's last turn that has any: from
// memory when this daemon ran it, else from the log.
func (tr *tree) lastMessage(ctx context.Context) string {
	ls := tr.ls
	ls.mu.Lock()
	for i := len(ls.turns.resultIDs) - 1; i >= 0; i-- {
		if r := ls.turns.results[ls.turns.resultIDs[i]]; r != nil && r.Text != "" {
			ls.mu.Unlock()
			return r.Text
		}
	}
	ls.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ls.h.Log.FlushSession(ctx, ls.id); err != nil {
		ls.logger.Warn("flush before reading the last message", "err", err)
	}
	text, _, err := ls.h.LastTurnText(ctx, ls.id)
	if err != nil {
		ls.logger.Warn("read the last message", "err", err)
	}
	return text
}
