package cluster

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// Handoff asks another node to resume a session (docs/api.md, "Failover
// with an object store"): the API server's forwarding client, which
// carries the node token.
type Handoff interface {
	// ResumeOn resumes session id on the node reached at advertise. An
	// error whose details.reason is "unreachable" never reached it.
	ResumeOn(ctx context.Context, node, advertise, id string) error
}

// hostPathFailure is the failure of a lost node's session that cannot move:
// its workspace is a directory of the lost node's own disk.
const hostPathFailure = "the session did not move to another node: its workspace is a host path on the lost node; resume it where that path is"

// resumeTries bounds how often a session is resumed again while another
// node holds it for a moment (a takeover racing this one).
const resumeTries = 5

// handoffTimeout bounds one ask of another node to resume a session: the
// restore of its files and its agent's start.
const handoffTimeout = 2 * time.Minute

// SetHandoff sets how this node asks another to resume a session; until
// it is set, this node resumes every session it moves itself.
func (n *Node) SetHandoff(h Handoff) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handoff = h
}

// parentFailure is the failure of a lost node's child session that did
// not move because its parent did not come back: a child runs only while
// its parent is live on its node.
func parentFailure(parentID string) *berth.Failure {
	return &berth.Failure{Kind: berth.FailStartup, Message: "the session did not move to another node: its parent session " +
		parentID + " was not resumed; resume the parent, then this session"}
}

// whyIn gives the failure each session of a lost node's tree is closed
// with: with failover on, a session whose workspace is a host path says
// it cannot move. A child's workspace is in its root's (docs/api.md,
// "Children"): it moves when its root's is managed.
func (n *Node) whyIn(ctx context.Context, tree []*berth.Session) func(*berth.Session) *berth.Failure {
	if !n.opts.Failover {
		return func(*berth.Session) *berth.Failure { return nil }
	}
	var root *berth.Session
	if tree[0].ParentID == "" {
		root = tree[0]
	} else if r, err := n.store.GetSession(ctx, tree[0].RootID); err == nil {
		root = r
	}
	rootManaged := root != nil && root.ManagedWorkspace
	return func(s *berth.Session) *berth.Failure {
		if s.ManagedWorkspace || (s.ParentID != "" && rootManaged) {
			return nil
		}
		return &berth.Failure{Kind: berth.FailSandbox, Message: hostPathFailure}
	}
}

// moveWorkers bounds the sessions of a lost node moved at once (a move
// is mostly the new node restoring files and starting an agent), and the
// trees whose moves are under way.
const moveWorkers = 4

// moveAll resumes, in the background, the sessions this node closed as
// node_lost, tree by tree (docs/api.md, "Failover with an object
// store"): each tree on one node, the least loaded as it goes counting
// the moves under way to each (the whole tree's as it is chosen), its
// sessions in order of depth (see moveTree); moveWorkers trees at once,
// and moveWorkers sessions. Each is moved once, since only the node that
// closed a session (under its lease) moves it. The heartbeat does not
// wait: a beat that waited for agents to start could let this node's own
// leases expire.
func (n *Node) moveAll(ctx context.Context, trees [][]*berth.Session) {
	if len(trees) == 0 {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		var mu sync.Mutex
		pending := map[string]int{}
		// given counts the trees this sweep sent to each node, for ties.
		given := map[string]int{}
		treeSem := make(chan struct{}, moveWorkers)
		sem := make(chan struct{}, moveWorkers)
		var wg sync.WaitGroup
		defer wg.Wait()
		for _, tree := range trees {
			select {
			case treeSem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			// The moves under way are counted before the nodes are read:
			// one that ends in between is then counted twice (its lease
			// read, its count not yet dropped), never missed.
			mu.Lock()
			under := maps.Clone(pending)
			mu.Unlock()
			// Read afresh: the sessions moved so far hold their leases,
			// this node's moves and those of another node closing some of
			// the same lost node's sessions.
			nodes, err := n.Nodes(ctx)
			if err != nil {
				<-treeSem
				n.log.Error("sessions of a lost node not moved: list nodes", "session_id", tree[0].ID, "sessions", len(tree), "err", err)
				continue
			}
			mu.Lock()
			target := leastLoaded(withPending(nodes, under), given, n.opts.ID)
			pending[target.ID] += len(tree)
			given[target.ID]++
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-treeSem }()
				n.moveTree(ctx, tree, target, sem, func() {
					mu.Lock()
					pending[target.ID]--
					mu.Unlock()
				})
			}()
		}
	}()
}

// moveTree resumes the sessions of one tree (in order of depth) on
// target, level by level: the root first, then its children once it is
// back, siblings at once (each takes a place in sem). A child goes where
// its parent was resumed; one whose parent did not come back (its resume
// failed, or it was not closed with the tree: stopped before) is not
// resumed, and stays stopped with a failure saying why, as do its own
// children. done is called once for each session, moved or not.
func (n *Node) moveTree(ctx context.Context, tree []*berth.Session, target *berth.Node, sem chan struct{}, done func()) {
	var mu sync.Mutex
	// where is the node each session of the tree was resumed on.
	where := map[string]*berth.Node{}
	for len(tree) > 0 {
		depth := tree[0].Depth
		var wg sync.WaitGroup
		for len(tree) > 0 && tree[0].Depth == depth {
			s := tree[0]
			tree = tree[1:]
			to := target
			if s.ParentID != "" {
				mu.Lock()
				to = where[s.ParentID]
				mu.Unlock()
				if to == nil {
					n.keepStopped(ctx, s)
					done()
					continue
				}
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer done()
				// A child resumed anywhere but on its parent's node is
				// refused: the root alone may fall back to this node.
				on, err := n.move(ctx, s.ID, to, s.ParentID == "")
				if err == nil {
					mu.Lock()
					where[s.ID] = on
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// keepStopped leaves a child of a lost node whose parent did not come
// back stopped, with a failure saying so.
func (n *Node) keepStopped(ctx context.Context, s *berth.Session) {
	if err := n.sessions.KeepStopped(ctx, s.ID, parentFailure(s.ParentID)); err != nil {
		n.log.Error("session of a lost node not resumed, and its failure not recorded", "session_id", s.ID,
			"parent_id", s.ParentID, "err", err)
		return
	}
	n.log.Warn("session of a lost node not resumed: its parent was not", "session_id", s.ID, "parent_id", s.ParentID)
}

// withPending is nodes with the moves under way to each added to its
// sessions.
func withPending(nodes []*berth.Node, pending map[string]int) []*berth.Node {
	out := make([]*berth.Node, len(nodes))
	for i, nd := range nodes {
		c := *nd
		c.Sessions += pending[nd.ID]
		out[i] = &c
	}
	return out
}

// leastLoaded is the live node with the fewest sessions; of those tied,
// the one given fewer of this sweep's trees (a lease another node holds
// for a moment, closing a session of the same lost node, counts as load:
// the tie spreads the sweep anyway), then this node (self: no hop, and
// two nodes moving a lost node's sessions at once spread them), else the
// first by id. With no live node listed, it is this one.
func leastLoaded(nodes []*berth.Node, given map[string]int, self string) *berth.Node {
	less := func(x, y *berth.Node) bool {
		if x.Sessions != y.Sessions {
			return x.Sessions < y.Sessions
		}
		if given[x.ID] != given[y.ID] {
			return given[x.ID] < given[y.ID]
		}
		if (x.ID == self) != (y.ID == self) {
			return x.ID == self
		}
		return x.ID < y.ID
	}
	var best *berth.Node
	for _, nd := range nodes {
		if nd.State == berth.NodeUp && (best == nil || less(nd, best)) {
			best = nd
		}
	}
	if best == nil {
		return &berth.Node{ID: self, State: berth.NodeUp}
	}
	return best
}

// move resumes session id on target: here when target is this node (or,
// with fallback, cannot be reached), else through the handoff. It
// returns the node the session was resumed on.
func (n *Node) move(ctx context.Context, id string, target *berth.Node, fallback bool) (*berth.Node, error) {
	began := time.Now()
	n.mu.Lock()
	h := n.handoff
	n.mu.Unlock()
	self := &berth.Node{ID: n.opts.ID, Advertise: n.opts.Advertise, State: berth.NodeUp}
	if h == nil {
		target = self
	}
	var err error
	if target.ID != n.opts.ID {
		err = whileHeld(ctx, func() error { return n.resumeOn(ctx, h, id, target) })
		if fallback && berth.ErrorDetails(err)["reason"] == "unreachable" {
			n.log.Warn("the node chosen for a lost node's session cannot be reached: it resumes here", "session_id", id,
				"node", target.ID, "err", err)
			target = self
		}
	}
	if target.ID == n.opts.ID {
		err = whileHeld(ctx, func() error {
			_, err := n.sessions.ResumeSession(ctx, id)
			return err
		})
	}
	if err != nil {
		n.log.Error("session of a lost node not resumed", "session_id", id, "node", target.ID, "err", err)
		return nil, err
	}
	n.log.Info("session of a lost node resumed", "session_id", id, "node", target.ID, "took", time.Since(began))
	return target, nil
}

// resumeOn is one ask of the handoff, bounded by handoffTimeout.
func (n *Node) resumeOn(ctx context.Context, h Handoff, id string, target *berth.Node) error {
	ctx, cancel := context.WithTimeout(ctx, handoffTimeout)
	defer cancel()
	return h.ResumeOn(ctx, target.ID, target.Advertise, id)
}

// whileHeld runs resume, again while another node holds the session's
// lease for a moment (a takeover of it racing this one, which finds it
// stopped and gives it back): the answer names that node.
func whileHeld(ctx context.Context, resume func() error) error {
	var err error
	for try := range resumeTries {
		if try > 0 {
			t := time.NewTimer(time.Duration(try) * 100 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		err = resume()
		if held, _ := berth.ErrorDetails(err)["node"].(string); err == nil || held == "" || !slices.Contains([]string{berth.EConflict, berth.EUnavailable}, berth.ErrorCode(err)) {
			return err
		}
	}
	return err
}
