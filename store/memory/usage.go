package memory

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// AddUsage implements berth.UsageStore: the session's own and tree usage,
// then each ancestor's tree usage, under the store's one lock.
func (s *Store) AddUsage(ctx context.Context, id string, delta berth.Usage) ([]berth.SessionUsage, error) {
	if err := codec.CheckUsage(delta); err != nil {
		return nil, err
	}
	delta.Tree = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	if !ok {
		return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	r.usage.Own.Add(delta)
	var out []berth.SessionUsage
	// An ancestor deleted before its descendant ends the walk.
	for ; r != nil && len(out) < codec.MaxAncestors; r = s.sessions[r.parent] {
		r.usage.Tree.Add(delta)
		sess, err := r.decode()
		if err != nil {
			return nil, err
		}
		out = append(out, codec.SessionUsage(sess, r.usage))
	}
	return out, nil
}
