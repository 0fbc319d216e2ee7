package codec

import (
	"time"

	"github.com/berth-sh/berth"
)

// NodeColumns are the columns of a node that ScanNode reads, with the
// count of the leases the node holds.
const NodeColumns = `id, advertise, state, started_at, last_heartbeat,
    (SELECT count(*) FROM leases l WHERE l.owner = nodes.id)`

// ScanNode reads the NodeColumns of one row.
func ScanNode(row Row) (*berth.Node, error) {
	n := &berth.Node{}
	var state string
	var started *int64
	var beat, sessions int64
	if err := row.Scan(&n.ID, &n.Advertise, &state, &started, &beat, &sessions); err != nil {
		return nil, err
	}
	n.State, n.StartedAt, n.LastHeartbeat, n.Sessions = berth.NodeState(state), FromNullNanos(started), FromNanos(beat), int(sessions)
	return n, nil
}

// NodeTimes checks a node registering at now and returns the stored form
// of its start time (NanosArg) and now in unix nanoseconds. EInvalid for
// a node without an id or times out of range.
func NodeTimes(n *berth.Node, now time.Time) (started any, at int64, err error) {
	if n == nil || n.ID == "" {
		return nil, 0, berth.Errorf(berth.EInvalid, "node id must not be empty")
	}
	if started, err = NanosArg(n.StartedAt, "node start time"); err != nil {
		return nil, 0, err
	}
	at, ok := ToNanos(now)
	if !ok {
		return nil, 0, berth.Errorf(berth.EInvalid, "heartbeat time out of range")
	}
	return started, at, nil
}

// HeartbeatTimes checks a heartbeat at now that renews leases for ttl and
// returns now and the leases' new expiry in unix nanoseconds. EInvalid for
// a ttl that is not positive or times out of range.
func HeartbeatTimes(now time.Time, ttl time.Duration) (at, until int64, err error) {
	return renewal(now, ttl, "heartbeat time")
}

// Leaving checks that node id, in state, may leave: left already when it
// has left, ENodeLost when it is lost (its leases are the takeover's).
func Leaving(id string, state berth.NodeState) (left bool, err error) {
	switch state {
	case berth.NodeLeft:
		return true, nil
	case berth.NodeLost:
		return false, NodeLost(id, state)
	}
	return false, nil
}

// NodeLost is the ENodeLost error of node id, which is in state (lost or
// left).
func NodeLost(id string, state berth.NodeState) error {
	return &berth.Error{Code: berth.ENodeLost, Message: "node " + id + " is " + string(state),
		Details: map[string]any{"node": id, "state": string(state)}}
}
