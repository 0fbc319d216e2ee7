package session

import (
	"context"
	"sync"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// Cluster is the manager's side of the cluster this daemon is a node of
// (docs/api.md, "Cluster nodes: ownership and failover"; package cluster
// implements it). A session is driven by
// the node that holds its lease: the manager takes the lease before a
// create or a resume writes its first event, gives it back once
// session_stopped is logged, and at boot carries on only the sessions
// whose lease this node still holds. nil (Options.Cluster) is one node:
// no lease is taken and every session found live at boot is this
// daemon's.
type Cluster interface {
	// Acquire takes the lease of a session for this node. EConflict when
	// another node holds it.
	Acquire(ctx context.Context, sessionID string) error
	// Release gives back the lease this node holds of a session.
	Release(ctx context.Context, sessionID string)
	// Holds reports whether this node holds the lease of a session (and
	// renews it): a booting node reattaches only those.
	Holds(ctx context.Context, sessionID string) bool
	// Owners returns the node driving each of the sessions named, for
	// those a node drives (a live lease).
	Owners(ctx context.Context, sessionIDs []string) map[string]string
}

// leases are the manager's side of its sessions' leases: none on one
// node; in a cluster, taken before a session's first event is written and
// given back after its last, and lost when another node takes over.
type leases struct {
	m *Manager
	// losing counts the live sessions being let go after a lost lease
	// (lost).
	losing sync.WaitGroup
}

// clustered reports whether the manager is a node of a cluster.
func (l *leases) clustered() bool { return l.m.opts.Cluster != nil }

// acquire takes a session's lease when the manager is a cluster node.
func (l *leases) acquire(ctx context.Context, id string) error {
	if !l.clustered() {
		return nil
	}
	if err := l.m.opts.Cluster.Acquire(ctx, id); err != nil {
		return err
	}
	// Another node may have written the session since this one did: the
	// log reads its end from the store before the next append.
	l.m.log.Release(id)
	return nil
}

// release gives a session's lease back when the manager is a cluster node.
func (l *leases) release(ctx context.Context, id string) {
	if l.clustered() {
		l.m.opts.Cluster.Release(ctx, id)
		l.m.log.Release(id)
	}
}

// leased runs fn, a write to a session no node drives (stopped), holding
// its lease meanwhile in a cluster: the store refuses a node's writes to
// a session whose lease it does not hold.
func (l *leases) leased(ctx context.Context, id string, fn func() error) error {
	if !l.clustered() {
		return fn()
	}
	if err := l.acquire(ctx, id); err != nil {
		return err
	}
	defer l.release(context.WithoutCancel(ctx), id)
	return fn()
}

// sweep kills what session id left behind on this host, unless another
// node drives the session now: on this host (nodes sharing a machine),
// what carries its id may be that node's agent.
func (l *leases) sweep(id string) {
	if l.clustered() {
		if owner := l.m.opts.Cluster.Owners(context.Background(), []string{id})[id]; owner != "" && owner != l.m.opts.NodeID {
			return
		}
	}
	l.m.sweeper.sweep(id)
}

// withOwners sets the node of sessions read from the store: the one
// holding its lease, if any.
func (l *leases) withOwners(ctx context.Context, ss []*berth.Session) {
	if !l.clustered() || len(ss) == 0 {
		return
	}
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	owners := l.m.opts.Cluster.Owners(ctx, ids)
	for _, s := range ss {
		if s.Node == "" {
			s.Node = owners[s.ID]
		}
	}
}

// LoseSessions lets go at once, writing nothing, of the sessions named
// (every live one when ids is nil): this node lost their leases, another
// drives them now. Their agents are killed (the shim's process group),
// their live sessions forgotten and their log hubs released. It returns once
// they are gone.
func (m *Manager) LoseSessions(ids []string) {
	var rts []*live.Session
	if ids == nil {
		rts = m.set.all()
	} else {
		for _, id := range ids {
			if ls := m.set.liveOf(id); ls != nil {
				rts = append(rts, ls)
			}
		}
	}
	var wg sync.WaitGroup
	for _, ls := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls.Lose()
		}()
	}
	wg.Wait()
}

// lost is told, by the event log or a refused store write, that a
// session's write was refused with ELeaseLost: its live session is let go in
// the background (Shutdown waits for it). It never blocks.
func (l *leases) lost(id string) {
	ls := l.m.set.liveOf(id)
	if ls == nil || ls.LetGo() {
		return
	}
	if l.m.set.enter(&l.losing) != nil {
		// The manager shuts down: it stops the session anyway.
		return
	}
	go func() {
		defer l.losing.Done()
		l.m.logger.Warn("this node lost the session's lease: another node drives it; its agent is killed", "session_id", id)
		ls.Lose()
	}()
}

// CloseLost closes a session whose node was lost, for the node that took
// its lease over (the caller holds it): an open turn ends, pending
// questions are canceled, session_stopped {stop_reason: node_lost} is
// logged and the session recorded stopped/node_lost, resumable on any
// node. What its agent left running on this host is killed (the lost
// node may be this machine). leftovers are the processes of this host by
// session id (sessionProcesses), nil to look them up. why says the
// session's failure (nil for none): why it cannot move. A session already
// stopped is left as it is. It returns the session as closed, nil when it
// was stopped already.
func (m *Manager) CloseLost(ctx context.Context, id string, leftovers map[string][]int, why func(*berth.Session) *berth.Failure) (*berth.Session, error) {
	if ls := m.set.liveOf(id); ls != nil {
		// This node's live session of it is stale: the lease was lost.
		ls.Lose()
	}
	s, err := m.store.GetSession(ctx, id)
	if err != nil || s.State == berth.StateStopped {
		return nil, err
	}
	// The lost node wrote the log last: its end is read from the store.
	m.log.Release(id)
	if leftovers == nil {
		leftovers = sessionProcesses()
	}
	how := nodeLostClose
	how.failure = why
	if err := m.recovery.closeSession(ctx, s, leftovers[id], how); err != nil {
		return nil, err
	}
	m.changes.publishStored(berth.ChangeSessionUpdated, m.stored(s))
	return s, nil
}

// SessionProcesses maps session ids to the pids of this host's processes
// that carry them (see CloseLost).
func SessionProcesses() map[string][]int { return sessionProcesses() }

// KeepStopped records why a stopped session of a lost node was not moved
// to another node (docs/api.md, "Failover with an object store"): its
// failure f, written under its lease; it stays stopped as it was closed,
// its log ending with that session_stopped. A session no longer stopped
// (resumed by hand meanwhile) is left as it is.
func (m *Manager) KeepStopped(ctx context.Context, id string, f *berth.Failure) error {
	return m.leases.leased(ctx, id, func() error {
		s, err := m.store.GetSession(ctx, id)
		if err != nil || s.State != berth.StateStopped {
			return err
		}
		s.Failure = f
		s.Badge = s.ComputeBadge(false, false)
		if err := m.store.UpdateSession(ctx, s, berth.StateStopped); err != nil {
			return err
		}
		m.changes.publishStored(berth.ChangeSessionUpdated, m.stored(s))
		return nil
	})
}
