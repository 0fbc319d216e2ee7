package session

import "sync"

// sessionLocks serialise a delete against the operations that must not
// overlap it: a resume (which would start an agent for a session being
// deleted) and a snapshot (which would archive a workspace being removed,
// and leave an archive of a deleted session). Delete holds its session's
// lock exclusively, the others shared.
//
// The lock order is in the package comment (manager.go). No lock of one
// sessionLocks is taken while another of it is held.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

// sessionLock is one session's lock and how many callers hold or wait for it.
type sessionLock struct {
	rw    sync.RWMutex
	users int
}

// lock takes the session's lock, exclusively or shared, and returns its
// unlock. The entry is dropped once nobody holds or waits for it.
func (l *sessionLocks) lock(id string, exclusive bool) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*sessionLock)
	}
	sl := l.locks[id]
	if sl == nil {
		sl = new(sessionLock)
		l.locks[id] = sl
	}
	sl.users++
	l.mu.Unlock()
	if exclusive {
		sl.rw.Lock()
	} else {
		sl.rw.RLock()
	}
	return func() {
		if exclusive {
			sl.rw.Unlock()
		} else {
			sl.rw.RUnlock()
		}
		l.mu.Lock()
		if sl.users--; sl.users == 0 {
			delete(l.locks, id)
		}
		l.mu.Unlock()
	}
}
