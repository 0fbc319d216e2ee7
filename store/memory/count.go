package memory

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// CountSessions implements berth.SessionCounter: each session decoded and
// reduced to its tally, as a list would decode it.
func (s *Store) CountSessions(ctx context.Context, exclude []string) ([]berth.SessionCount, error) {
	skip := make(map[string]bool, len(exclude))
	for _, id := range exclude {
		skip[id] = true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	by := map[berth.Tally]int{}
	for _, r := range s.order {
		if skip[r.id] {
			continue
		}
		sess, err := r.decode()
		if err != nil {
			return nil, err
		}
		by[sess.Tally()]++
	}
	return codec.Counts(by), nil
}
