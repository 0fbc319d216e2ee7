package session

import (
	"context"
	"sync"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// sessionSet is the set of sessions live here, the slots reserved for the
// ones being created or resumed under limits.max_sessions, and the ones
// the boot is still reattaching. Its mutex takes its place in the lock
// order of the package comment (manager.go).
type sessionSet struct {
	// max is limits.max_sessions (0: no bound).
	max int

	mu   sync.Mutex
	live map[string]*live.Session
	// reserved counts slots taken by creates and resumes not live yet.
	reserved int
	// booting holds, for each session found live at boot whose reattach
	// is not over, a channel closed when it is (boot.go), and its Tally
	// once the boot has read it (the census counts it so, census.go).
	booting map[string]*bootingSession
	// closing is set once the manager shuts down: nothing starts after.
	closing bool
	// forgotten counts the sessions that stopped being live here.
	forgotten uint64
}

// newSessionSet returns an empty set bounded by max live sessions.
func newSessionSet(max int) sessionSet {
	return sessionSet{max: max, live: make(map[string]*live.Session), booting: make(map[string]*bootingSession)}
}

// enter registers an API call that may start agents in calls; it fails
// once the manager shuts down.
func (st *sessionSet) enter(calls *sync.WaitGroup) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closing {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	calls.Add(1)
	return nil
}

// close marks the set closing: enter refuses from now on.
func (st *sessionSet) close() {
	st.mu.Lock()
	st.closing = true
	st.mu.Unlock()
}

// isClosing reports whether the manager shuts down.
func (st *sessionSet) isClosing() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closing
}

// reserve takes a slot for a session about to be created or resumed;
// goLive turns it into a live session, release gives it back.
func (st *sessionSet) reserve() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.max > 0 && len(st.live)+st.reserved >= st.max {
		return &berth.Error{Code: berth.EUnavailable, Message: "too many live sessions (limits.max_sessions)",
			Details: map[string]any{"max_sessions": st.max}}
	}
	st.reserved++
	return nil
}

// release gives back a reserved slot.
func (st *sessionSet) release() {
	st.mu.Lock()
	st.reserved--
	st.mu.Unlock()
}

// goLive makes ls its session's live session, taking over the slot it
// reserved when reserved is set, unless another live session of the
// session is there already: that one is returned, and ls is not live
// (its slot stays reserved, for the caller to release).
func (st *sessionSet) goLive(ls *live.Session, reserved bool) *live.Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	if other := st.live[ls.ID()]; other != nil {
		return other
	}
	if reserved {
		st.reserved--
	}
	st.live[ls.ID()] = ls
	return nil
}

// forget drops a live session once its session is stopped.
func (st *sessionSet) forget(ls *live.Session) {
	st.mu.Lock()
	if st.live[ls.ID()] == ls {
		delete(st.live, ls.ID())
		st.forgotten++
	}
	st.mu.Unlock()
}

// forgets returns how many sessions have stopped being live here: a
// reader that saw it unchanged knows no live session ended meanwhile.
func (st *sessionSet) forgets() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.forgotten
}

// liveOf returns the live session of session id, or nil.
func (st *sessionSet) liveOf(id string) *live.Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.live[id]
}

// all returns the live sessions as they are now.
func (st *sessionSet) all() []*live.Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]*live.Session, 0, len(st.live))
	for _, ls := range st.live {
		out = append(out, ls)
	}
	return out
}

// ids returns the ids of the sessions live here.
func (st *sessionSet) ids() map[string]bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]bool, len(st.live))
	for id := range st.live {
		out[id] = true
	}
	return out
}

// childrenOf returns the live sessions whose parent is parentID.
func (st *sessionSet) childrenOf(parentID string) []*live.Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*live.Session
	for _, ls := range st.live {
		if ls.ParentID() == parentID {
			out = append(out, ls)
		}
	}
	return out
}

// busyIn returns a live session other than self whose workspace is ws and
// that has a turn in flight, or "".
func (st *sessionSet) busyIn(ws, self string) string {
	for _, ls := range st.all() {
		if ls.ID() != self && ls.TurnIn(ws) {
			return ls.ID()
		}
	}
	return ""
}

// turnCheckpoints names the checkpoints the turns in flight of tree's live
// sessions were taken before: a prune keeps them, so that a turn still
// running can be rewound whatever its children write meanwhile.
func (st *sessionSet) turnCheckpoints(tree string) map[string]bool {
	pinned := map[string]bool{}
	for _, ls := range st.all() {
		if c := ls.TurnCheckpoint(tree); c != "" {
			pinned[c] = true
		}
	}
	return pinned
}

// bootingSession is a session of the set being reattached. tally is its
// Tally as stored, once the boot has read it whole (read).
type bootingSession struct {
	done  chan struct{}
	read  bool
	tally berth.Tally
}

// boot marks sessions whose reattach begins: a request for one waits
// for it (awaitBoot).
func (st *sessionSet) boot(sessions []berth.LiveSession) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range sessions {
		st.booting[s.ID] = &bootingSession{done: make(chan struct{})}
	}
}

// bootRead records the Tally of each session being reattached that rec
// holds whole.
func (st *sessionSet) bootRead(rec map[string]*berth.Recovery) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, r := range rec {
		if b := st.booting[id]; b != nil && r.Session != nil {
			b.read, b.tally = true, r.Session.Tally()
		}
	}
}

// booted marks a session's reattach as over, one way or the other.
func (st *sessionSet) booted(id string) {
	st.mu.Lock()
	b, ok := st.booting[id]
	delete(st.booting, id)
	st.mu.Unlock()
	if ok {
		close(b.done)
	}
}

// bootTallies are the Tallies of the sessions being reattached that the
// boot has read, by id: until it has, the store counts them.
func (st *sessionSet) bootTallies() map[string]berth.Tally {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]berth.Tally, len(st.booting))
	for id, b := range st.booting {
		if b.read {
			out[id] = b.tally
		}
	}
	return out
}

// awaitBoot waits until the session's reattach is over, if one is under
// way: a session answers nothing before it knows whether its agent is
// still there. EUnavailable if ctx ends first.
func (st *sessionSet) awaitBoot(ctx context.Context, id string) error {
	st.mu.Lock()
	b, ok := st.booting[id]
	st.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "session %s is still being reattached", id)
	}
}

// reattaching counts the sessions whose reattach is not over.
func (st *sessionSet) reattaching() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.booting)
}
