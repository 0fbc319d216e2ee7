package memory

import (
	"context"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// ListRecovery reads the session, its open turn, its pending queue
// entries, its pending permissions and its pending elicitations of every
// session named, as GetSession, ListQueue, ListPermissions and
// ListElicitations give them. Sessions that do not exist are absent.
// The parts are read one after another, not in one snapshot: a memory
// store's sessions die with their daemon, so no boot reads it for real.
func (s *Store) ListRecovery(ctx context.Context, sessionIDs []string) (map[string]*berth.Recovery, error) {
	out := make(map[string]*berth.Recovery, len(sessionIDs))
	for _, id := range slices.Compact(slices.Sorted(slices.Values(sessionIDs))) {
		sess, err := s.GetSession(ctx, id)
		if berth.IsCode(err, berth.ENotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		open, ok := s.openTurn(id)
		if !ok {
			continue
		}
		q, err := s.ListQueue(ctx, id)
		if berth.IsCode(err, berth.ENotFound) {
			// Deleted meanwhile.
			continue
		}
		if err != nil {
			return nil, err
		}
		perms, err := s.ListPermissions(ctx, id, berth.PermissionPending)
		if berth.IsCode(err, berth.ENotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		elics, err := s.ListElicitations(ctx, id, berth.ElicitationPending)
		if berth.IsCode(err, berth.ENotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// Nothing to recover is nil, as the SQL stores give it.
		rec := &berth.Recovery{Session: sess, OpenTurn: open}
		if len(q) > 0 {
			rec.Queue = q
		}
		if len(perms) > 0 {
			rec.Pending = perms
		}
		if len(elics) > 0 {
			rec.Elicitations = elics
		}
		out[id] = rec
	}
	return out, nil
}

// ListLive implements berth.RecoveryStore.
func (s *Store) ListLive(ctx context.Context) ([]berth.LiveSession, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []berth.LiveSession{}
	for _, r := range s.sessions {
		switch r.state {
		case berth.StateStarting, berth.StateActive, berth.StateStopping:
		default:
			continue
		}
		sess, err := r.decode()
		if err != nil {
			return nil, err
		}
		out = append(out, berth.LiveSession{ID: r.id, State: r.state, ShimSocket: sess.ShimSocket})
	}
	return out, nil
}

// openTurn is the session's last turn_started when no turn_ended of its
// turn follows it (nil when no turn is open); false when the session does
// not exist.
func (s *Store) openTurn(id string) (*berth.Event, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.sessions[id]
	if !ok {
		return nil, false
	}
	started := r.log.byType[berth.EventTurnStarted]
	if len(started) == 0 {
		return nil, true
	}
	last := started[len(started)-1]
	ended := r.log.byType[berth.EventTurnEnded]
	for _, e := range ended[after(ended, last.seq):] {
		if e.turn == last.turn {
			return nil, true
		}
	}
	ev := &berth.Event{Seq: last.seq, SessionID: id, TurnID: last.turn, Type: last.typ, Data: slices.Clone(last.data)}
	if last.hasTime {
		ev.Time = codec.FromNanos(last.nanos)
	}
	return ev, true
}
