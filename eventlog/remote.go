package eventlog

import (
	"maps"
	"slices"
)

// A session's log may be written by another daemon sharing the store (a
// cluster: docs/api.md, "Cluster nodes: ownership and failover"): that
// node's commits reach this one only as notices ("session S is committed
// up to seq N", PostgreSQL NOTIFY). The store stays the truth: a notice
// only makes the streams of S read it again, and makes sure this log no
// longer trusts a `last` it published before the session changed hands.

// Notify tells the log that sessionID's events are committed up to lastSeq
// by some node (this one included). Streams of the session waiting past
// what this log published re-read the store; a hub that trusted an older
// last forgets it, so neither its readers nor its writer rely on it. A
// notice this log already published is a no-op. Notify("", 0) is WakeAll:
// notices may have been missed. It never blocks on readers, so it fits
// berth.EventWatcher's callback as it is.
func (l *Log) Notify(sessionID string, lastSeq int64) {
	if sessionID == "" {
		l.WakeAll()
		return
	}
	// A session nobody streams or writes here has no hub: nothing to wake.
	if h := l.lookup(sessionID); h != nil {
		h.notice(lastSeq)
	}
}

// Wake makes the waiting streams of sessionID re-read the store, for a
// caller that does not know how far the log goes: unlike Notify it cannot
// tell this node's own commits apart, so it always drops the hub's
// committed state (the writer reloads it from the store before its next
// commit of the session).
func (l *Log) Wake(sessionID string) {
	if h := l.lookup(sessionID); h != nil {
		h.release()
	}
}

// WakeAll is Wake of every session the log keeps in memory, for when
// notices may have been lost (the watcher reconnected).
func (l *Log) WakeAll() {
	l.hubsMu.Lock()
	hubs := slices.Collect(maps.Values(l.hubs))
	l.hubsMu.Unlock()
	for _, h := range hubs {
		h.release()
	}
}

// Release is called when this node stops writing sessionID (it lost or gave
// up the session's lease; another node may write it next): the log drops
// what it knows of the session's end, so its streams go on from the store
// and a later write here starts from the store's last seq. Unlike Forget,
// the streams carry on.
func (l *Log) Release(sessionID string) { l.Wake(sessionID) }

// notice records that the log is committed up to seq somewhere and wakes
// the readers when that is past what the hub published.
func (h *hub) notice(seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return
	}
	h.seen = max(h.seen, seq)
	if h.known && seq <= h.last {
		// Already published here (this node's commit): readers were woken.
		return
	}
	// Past what this node published: another node's commit, or one of
	// ours not published yet. Either way the store knows better (the ring
	// is kept: committed events never change).
	h.known = false
	h.broadcast()
}

// release drops the hub's committed state, and its ring (the memory goes
// back), and wakes its readers, which then read the store.
func (h *hub) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return
	}
	h.known = false
	h.ring.reset()
	h.broadcast()
}
