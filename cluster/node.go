// Package cluster is the life of one node of several `berth serve` sharing one
// PostgreSQL store (docs/api.md, "Cluster nodes: ownership and failover"): it
// registers the node, heartbeats it (renewing every lease it holds), marks lost
// the nodes that stopped heartbeating and closes their sessions, and lets go of
// every session at once when this node finds itself lost. PostgreSQL is the
// only shared component: leases with fencing tokens say which node drives a
// session, and the store refuses the writes of a node that lost one.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// Sessions is what a node needs of the session manager
// (session.Manager).
type Sessions interface {
	// LoseSessions lets go at once, writing nothing, of the sessions
	// named (every live one when ids is nil).
	LoseSessions(ids []string)
	// CloseLost closes a session of a lost node, whose lease the caller
	// holds: stopped/node_lost, with the failure why gives (nil: none).
	// leftovers are the processes of this host by session id (nil: looked
	// up). It returns the session closed, nil when it was stopped already.
	CloseLost(ctx context.Context, id string, leftovers map[string][]int, why func(*berth.Session) *berth.Failure) (*berth.Session, error)
	// ResumeSession resumes a stopped session on this node.
	ResumeSession(ctx context.Context, id string) (*berth.Session, error)
	// LiveIDs are the sessions this node drives now.
	LiveIDs() map[string]bool
	// KeepStopped records why a stopped session of a lost node was not
	// moved: its failure, the session left stopped as it was closed.
	KeepStopped(ctx context.Context, id string, f *berth.Failure) error
}

// Options configure a Node.
type Options struct {
	// ID and Advertise are this node's ([cluster] node_id, advertise).
	ID        string
	Advertise string
	// TTL is [cluster] lease_ttl: a node silent this long is lost.
	TTL time.Duration
	// Token is the node token ([cluster] token) forwarded writes carry.
	Token string
	// Failover moves the sessions this node closes as node_lost to the
	// least-loaded live node ([cluster] failover = "resume"); without it
	// they stay stopped, resumable by hand.
	Failover bool
	// Store is the shared store; it must be a berth.NodeStore.
	Store berth.Store
	// Processes maps session ids to this host's processes that carry
	// them, read once per lost node (nil: none are looked for).
	Processes func() map[string][]int
	Logger    *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Node is this daemon as a node of a cluster. It implements
// session.Cluster.
type Node struct {
	opts  Options
	nodes berth.NodeStore
	store berth.Store
	log   *slog.Logger

	// sessions is set by Start, before the heartbeat runs.
	sessions Sessions

	mu sync.Mutex
	// held are the leases this node took, each with its fencing token and
	// how many of this node's users hold it (a takeover, a resume, a
	// write to a stopped session may overlap on one session): the lease
	// goes back when the last one releases it.
	held map[string]*heldLease
	// lastBeat is when the last heartbeat succeeded.
	lastBeat time.Time
	// leaseMu serialises the lease calls (Acquire, Release).
	leaseMu sync.Mutex
	// fencedSelf is set when the node let go of its sessions for want of
	// a heartbeat; the next heartbeat closes those it still holds.
	fencedSelf bool
	// adverts are the nodes' URLs as last read (ListNodes).
	adverts map[string]string
	// handoff asks another node to resume a session (SetHandoff).
	handoff Handoff
	// treeWaits counts the beats in a row each lost node's tree was left
	// alone, another node holding its root (waitTree), by lost/root.
	treeWaits map[string]int

	stop context.CancelFunc
	wg   sync.WaitGroup
	// beats counts successful heartbeats (tests).
	beats int64
}

// New returns the node; Join registers it. EInvalid when the store keeps
// no node registry.
func New(opts Options) (*Node, error) {
	ns, ok := opts.Store.(berth.NodeStore)
	if !ok {
		return nil, berth.Errorf(berth.EInvalid, "the %s store keeps no node registry: it cannot be shared by a cluster", opts.Store.Name())
	}
	if opts.TTL <= 0 {
		return nil, berth.Errorf(berth.EInvalid, "cluster: lease_ttl must be positive")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Node{opts: opts, nodes: ns, store: opts.Store, log: opts.Logger.With("node_id", opts.ID),
		held: map[string]*heldLease{}, treeWaits: map[string]int{}}, nil
}

// ID is the node's id.
func (n *Node) ID() string { return n.opts.ID }

// Join fences the store (from now on it refuses this node's writes to a
// session whose lease it does not hold) and registers the node, up, before
// the session manager looks at any session.
func (n *Node) Join(ctx context.Context) error {
	f, ok := n.store.(berth.Fencer)
	if !ok {
		return berth.Errorf(berth.EInvalid, "the %s store cannot fence a node's writes: it cannot be shared by a cluster", n.store.Name())
	}
	f.Fence(n.opts.ID)
	return n.register(ctx)
}

// register (re)joins the registry as a fresh incarnation.
func (n *Node) register(ctx context.Context) error {
	now := n.opts.Now().UTC()
	if err := n.nodes.RegisterNode(ctx, &berth.Node{ID: n.opts.ID, Advertise: n.opts.Advertise, State: berth.NodeUp,
		StartedAt: now, LastHeartbeat: now}, now); err != nil {
		return berth.WrapError(berth.ErrorCode(err), err, "register node %s", n.opts.ID)
	}
	n.mu.Lock()
	n.lastBeat = now
	n.mu.Unlock()
	n.log.Info("node joined the cluster", "advertise", n.opts.Advertise, "lease_ttl", n.opts.TTL)
	return nil
}

// Start runs the heartbeat until Close: every TTL/3 the node heartbeats
// (renewing its leases), marks lost the nodes silent for TTL and closes
// their sessions.
func (n *Node) Start(sessions Sessions) {
	n.sessions = sessions
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(n.opts.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.beat(ctx)
			}
		}
	}()
}

// Close stops the heartbeat. With leave, the node leaves the registry
// (its leases released): its sessions must be stopped by then. Without,
// the node stays registered: a restart within lease_ttl carries its
// sessions on, else the others mark it lost and close them.
func (n *Node) Close(ctx context.Context, leave bool) {
	if n.stop != nil {
		n.stop()
		n.wg.Wait()
	}
	if !leave {
		return
	}
	if err := n.nodes.LeaveNode(ctx, n.opts.ID); err != nil {
		n.log.Warn("node did not leave the registry", "err", err)
	}
}

// beat is one tick of the heartbeat.
func (n *Node) beat(ctx context.Context) {
	now := n.opts.Now().UTC()
	err := n.nodes.Heartbeat(ctx, n.opts.ID, now, n.opts.TTL)
	switch {
	case err == nil:
		n.mu.Lock()
		n.lastBeat = now
		n.beats++
		n.mu.Unlock()
	case berth.IsCode(err, berth.ENodeLost), berth.IsCode(err, berth.ENotFound):
		// The others marked this node lost and took its sessions over:
		// it drives none of them from now on, then joins again afresh.
		n.log.Error("this node was marked lost: letting go of every session", "err", err)
		n.loseAll()
		if err := n.register(ctx); err != nil && ctx.Err() == nil {
			n.log.Error("node did not join again", "err", err)
		}
		return
	default:
		if ctx.Err() != nil {
			return
		}
		n.mu.Lock()
		silent := now.Sub(n.lastBeat)
		n.mu.Unlock()
		n.log.Warn("heartbeat failed", "err", err, "silent_for", silent)
		if silent >= n.opts.TTL {
			// The others take this node for lost by now: its agents must
			// not run on beside the ones they may resume.
			n.log.Error("no heartbeat for lease_ttl: letting go of every session")
			n.loseAll()
			n.mu.Lock()
			n.fencedSelf = true
			n.mu.Unlock()
		}
		return
	}
	n.mu.Lock()
	fenced := n.fencedSelf
	n.fencedSelf = false
	n.mu.Unlock()
	if fenced {
		n.closeDropped(ctx)
	}
	n.takeOver(ctx, now)
}

// closeDropped closes, as node_lost, the sessions this node let go of
// when its heartbeats failed but whose leases it still holds (no other
// node took them: none marked it lost), so that none stays active with
// no node driving it.
func (n *Node) closeDropped(ctx context.Context) {
	leases, err := n.nodes.LeasesOf(ctx, n.opts.ID)
	if err != nil {
		n.log.Error("sessions let go of not closed", "err", err)
		return
	}
	live := n.sessions.LiveIDs()
	dropped := leases[:0:0]
	for _, l := range leases {
		if !live[l.SessionID] {
			dropped = append(dropped, l)
		}
	}
	trees, err := n.treesOf(ctx, dropped, time.Time{})
	if err != nil {
		n.log.Error("sessions let go of not closed", "err", err)
		return
	}
	var procs map[string][]int
	if len(trees) > 0 && n.opts.Processes != nil {
		procs = n.opts.Processes()
	}
	var moves [][]*berth.Session
	defer n.forgetWaits(n.opts.ID, trees)
	for _, tree := range trees {
		if move, _ := n.closeTree(ctx, n.opts.ID, tree, procs); len(move) > 0 {
			moves = append(moves, move)
		}
	}
	n.moveAll(ctx, moves)
}

// loseAll lets go of every session this node drives.
func (n *Node) loseAll() {
	n.sessions.LoseSessions(nil)
	n.mu.Lock()
	clear(n.held)
	n.mu.Unlock()
}

// takeOver marks lost the nodes silent for TTL, then closes the sessions
// every lost node still holds leases of, once each lease has expired (a
// lease outlives its node's last heartbeat by up to TTL): the lease taken
// over (its token grows, so the lost node's writes are refused), the
// session stopped/node_lost, the lease given back. Every node does this
// each beat, so the sessions of a node lost while the one that marked it
// died too are still closed; of nodes racing for one lease, one takes it.
func (n *Node) takeOver(ctx context.Context, now time.Time) {
	marked, err := n.nodes.MarkLostNodes(ctx, now, n.opts.TTL)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("look for lost nodes", "err", err)
		}
		return
	}
	for _, ln := range marked {
		n.log.Warn("node lost: its sessions are stopped (node_lost), resumable on any node",
			"lost_node", ln.ID, "last_heartbeat", ln.LastHeartbeat)
	}
	nodes, err := n.Nodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("list nodes", "err", err)
		}
		return
	}
	for _, ln := range nodes {
		if ln.State == berth.NodeUp || ln.Sessions == 0 || ln.ID == n.opts.ID {
			continue
		}
		n.closeSessionsOf(ctx, ln, now)
	}
}

// closeSessionsOf closes the sessions whose expired leases the lost (or
// left) node ln still holds, tree by tree (see treesOf).
func (n *Node) closeSessionsOf(ctx context.Context, ln *berth.Node, now time.Time) {
	began := time.Now()
	leases, err := n.nodes.LeasesOf(ctx, ln.ID)
	if err != nil {
		n.log.Error("sessions of a lost node not closed", "lost_node", ln.ID, "err", err)
		return
	}
	trees, err := n.treesOf(ctx, leases, now)
	if err != nil {
		n.log.Error("sessions of a lost node not closed", "lost_node", ln.ID, "err", err)
		return
	}
	var procs map[string][]int
	if len(trees) > 0 && n.opts.Processes != nil {
		procs = n.opts.Processes()
	}
	var moves [][]*berth.Session
	closed := 0
	for _, tree := range trees {
		move, c := n.closeTree(ctx, ln.ID, tree, procs)
		if len(move) > 0 {
			moves = append(moves, move)
		}
		closed += c
	}
	n.forgetWaits(ln.ID, trees)
	if closed > 0 {
		n.log.Info("sessions of a lost node closed", "lost_node", ln.ID, "sessions", closed, "took", time.Since(began))
	}
	n.moveAll(ctx, moves)
}

// treesOf reads the sessions of leases and groups them by tree (a root
// session and its descendants, root_id): each tree in order of depth, a
// parent before its children. A tree with a lease not yet expired at now
// (its node may have renewed it just before it was lost; zero now: none
// is waited for) waits, whole, for a later beat: a tree is closed and
// moved at once. A session deleted meanwhile is left out.
func (n *Node) treesOf(ctx context.Context, leases []*berth.Lease, now time.Time) ([][]*berth.Session, error) {
	byRoot := map[string][]*berth.Session{}
	waits := map[string]bool{}
	var roots []string
	for _, l := range leases {
		s, err := n.store.GetSession(ctx, l.SessionID)
		if berth.IsCode(err, berth.ENotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		root := cmp.Or(s.RootID, s.ID)
		if _, ok := byRoot[root]; !ok {
			roots = append(roots, root)
		}
		byRoot[root] = append(byRoot[root], s)
		if !now.IsZero() && l.ExpiresAt.After(now) {
			waits[root] = true
		}
	}
	var trees [][]*berth.Session
	for _, root := range roots {
		if waits[root] {
			continue
		}
		tree := byRoot[root]
		slices.SortStableFunc(tree, func(x, y *berth.Session) int {
			return cmp.Or(cmp.Compare(x.Depth, y.Depth), cmp.Compare(x.ID, y.ID))
		})
		trees = append(trees, tree)
	}
	return trees, nil
}

// treeWaits is how many beats in a row a node leaves alone a lost node's
// tree whose root another node holds (closing the tree) before it closes
// what is left of the tree itself: a holder that died in the middle, or
// that moved the root but could not close a child, would otherwise leave
// that child active, driven by no node, for ever.
const treeWaits = 3

// closeTree takes the sessions of one tree of lost node lost (this node
// itself: those it let go of) over and closes them, parents first. The lease of
// the tree's root is held meanwhile: a node racing this one for the tree
// fails to take it and leaves the whole tree alone (one node closes, and
// moves, a tree whole). It returns the sessions closed here that are
// this node's to move (failover on, closed here and free to move), in
// order of depth, and how many it closed or found closed.
func (n *Node) closeTree(ctx context.Context, lost string, tree []*berth.Session, procs map[string][]int) (moves []*berth.Session, closed int) {
	root := cmp.Or(tree[0].RootID, tree[0].ID)
	err := n.Acquire(ctx, root)
	switch {
	case err == nil:
		defer n.Release(context.WithoutCancel(ctx), root)
	case berth.IsCode(err, berth.EConflict):
		if n.waitTree(lost, root) {
			n.log.Info("sessions of a lost node left alone: another node holds their root", "session_id", root,
				"sessions", len(tree), "details", errDetails(err))
			return nil, 0
		}
		n.log.Warn("sessions of a lost node closed while another node holds their root", "session_id", root,
			"sessions", len(tree), "details", errDetails(err))
	case !berth.IsCode(err, berth.ENotFound):
		// A deleted root takes its tree along: what is left is closed.
		n.log.Error("sessions of a lost node not closed", "session_id", root, "sessions", len(tree), "err", err)
		return nil, 0
	}
	why := n.whyIn(ctx, tree)
	for _, s := range tree {
		c, err := n.closeLost(ctx, s.ID, procs, why)
		if err != nil {
			n.log.Error("session of a lost node not closed", "session_id", s.ID, "err", err)
			continue
		}
		closed++
		if c != nil && c.Failure == nil && n.opts.Failover {
			moves = append(moves, c)
		}
	}
	return moves, closed
}

// waitTree counts one more beat that the tree of root, of lost node
// lost, was left alone, and reports whether to leave it alone again.
func (n *Node) waitTree(lost, root string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := lost + "/" + root
	n.treeWaits[key]++
	return n.treeWaits[key] <= treeWaits
}

// forgetWaits forgets the trees of lost node lost that were left alone,
// but for those of roots still there.
func (n *Node) forgetWaits(lost string, trees [][]*berth.Session) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.treeWaits) == 0 {
		return
	}
	keep := map[string]bool{}
	for _, tree := range trees {
		keep[lost+"/"+cmp.Or(tree[0].RootID, tree[0].ID)] = true
	}
	for key := range n.treeWaits {
		if strings.HasPrefix(key, lost+"/") && !keep[key] {
			delete(n.treeWaits, key)
		}
	}
}

// closeLost takes one session of a lost node over and closes it, with
// the failure why gives. It returns the session closed, nil when it was
// left alone (stopped already, back with its node, taken by another,
// deleted); its lease is given back.
func (n *Node) closeLost(ctx context.Context, id string, procs map[string][]int, why func(*berth.Session) *berth.Failure) (*berth.Session, error) {
	if err := n.Acquire(ctx, id); err != nil {
		if berth.IsCode(err, berth.EConflict) || berth.IsCode(err, berth.ENotFound) {
			n.log.Info("session of a lost node left alone", "session_id", id, "err", err, "details", errDetails(err))
			return nil, nil
		}
		return nil, err
	}
	defer n.Release(context.WithoutCancel(ctx), id)
	if procs == nil {
		procs = map[string][]int{}
	}
	return n.sessions.CloseLost(ctx, id, procs, why)
}

// Acquire implements session.Cluster: it takes the lease of a session for
// this node until now+TTL (the heartbeat renews it).
func (n *Node) Acquire(ctx context.Context, id string) error {
	// One lease call at a time: a release never overtakes an acquire of
	// the same session by another user on this node.
	n.leaseMu.Lock()
	defer n.leaseMu.Unlock()
	l, err := n.store.AcquireLease(ctx, id, n.opts.ID, n.opts.Now().UTC(), n.opts.TTL)
	if berth.IsCode(err, berth.EConflict) {
		// Said with the node that drives it, for the caller to name.
		owner, _ := berth.ErrorDetails(err)["owner"].(string)
		if owner == "" {
			if cur, gerr := n.store.GetLease(ctx, id); gerr == nil {
				owner = cur.Owner
			}
		}
		return &berth.Error{Code: berth.EConflict, Message: "session " + id + " is driven by node " + owner,
			Details: map[string]any{"node": owner}, Err: err}
	}
	if err != nil {
		return err
	}
	n.mu.Lock()
	if h := n.held[id]; h != nil && h.token == l.Token {
		h.users++
	} else {
		n.held[id] = &heldLease{token: l.Token, users: 1}
	}
	n.mu.Unlock()
	return nil
}

// heldLease is a lease this node took.
type heldLease struct {
	token int64
	users int
}

// Release implements session.Cluster: it gives back the lease this node
// took of a session. A lease another node took meanwhile is left alone.
func (n *Node) Release(ctx context.Context, id string) {
	n.leaseMu.Lock()
	defer n.leaseMu.Unlock()
	n.mu.Lock()
	h := n.held[id]
	if h != nil && h.users > 1 {
		// Another user of this node still drives it.
		h.users--
		n.mu.Unlock()
		return
	}
	delete(n.held, id)
	n.mu.Unlock()
	var token int64
	if h != nil {
		token = h.token
	} else {
		l, err := n.store.GetLease(ctx, id)
		if err != nil || l.Owner != n.opts.ID {
			return
		}
		token = l.Token
	}
	if err := n.store.ReleaseLease(ctx, id, n.opts.ID, token); err != nil &&
		!berth.IsCode(err, berth.EConflict) && !berth.IsCode(err, berth.ENotFound) {
		n.log.Warn("lease not released", "session_id", id, "err", err)
	}
}

// Holds implements session.Cluster: whether this node holds a session's
// lease, renewed now. A lease another node took, or none (a session no
// node drives), is not this node's.
func (n *Node) Holds(ctx context.Context, id string) bool {
	l, err := n.store.GetLease(ctx, id)
	if err != nil || l.Owner != n.opts.ID {
		return false
	}
	return n.Acquire(ctx, id) == nil
}

// Owners implements session.Cluster: the holder of each live lease among
// the sessions named.
func (n *Node) Owners(ctx context.Context, ids []string) map[string]string {
	out := make(map[string]string, len(ids))
	now := n.opts.Now()
	if len(ids) <= 2 {
		for _, id := range ids {
			if l, err := n.store.GetLease(ctx, id); err == nil && l.Owner != "" && l.ExpiresAt.After(now) {
				out[id] = l.Owner
			}
		}
		return out
	}
	// A page of sessions: the leases of every node, a read per node.
	nodes, err := n.nodes.ListNodes(ctx)
	if err != nil {
		return out
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for _, nd := range nodes {
		leases, err := n.nodes.LeasesOf(ctx, nd.ID)
		if err != nil {
			continue
		}
		for _, l := range leases {
			if want[l.SessionID] && l.ExpiresAt.After(now) {
				out[l.SessionID] = l.Owner
			}
		}
	}
	return out
}

// Beats counts the node's successful heartbeats.
func (n *Node) Beats() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.beats
}

// errDetails returns the details of a berth error, for logs.
func errDetails(err error) map[string]any {
	var be *berth.Error
	if errors.As(err, &be) {
		return be.Details
	}
	return nil
}
