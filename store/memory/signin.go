package memory

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// PutSignIn implements berth.SignInStore.
func (s *Store) PutSignIn(_ context.Context, in berth.SignIn) error {
	if _, err := codec.SignInExpiry(in); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.signins[in.ID]; ok {
		return codec.SignInConflict()
	}
	in.ExpiresAt = in.ExpiresAt.UTC()
	s.signins[in.ID] = in
	return nil
}

// GetSignIn implements berth.SignInStore.
func (s *Store) GetSignIn(_ context.Context, id [sha256.Size]byte) (berth.SignIn, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in, ok := s.signins[id]
	if !ok {
		return berth.SignIn{}, codec.SignInNotFound()
	}
	return in, nil
}

// DeleteSignIn implements berth.SignInStore.
func (s *Store) DeleteSignIn(_ context.Context, id [sha256.Size]byte) error {
	s.mu.Lock()
	delete(s.signins, id)
	s.mu.Unlock()
	return nil
}

// DeleteExpiredSignIns implements berth.SignInStore. It walks the map until
// it has removed limit: a map of live sign-ins only is walked whole, which
// the token holders who alone make them bound.
func (s *Store) DeleteExpiredSignIns(_ context.Context, now time.Time, limit int) (int, error) {
	_, limit, err := codec.SweepArgs(now, limit)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, in := range s.signins {
		if n == limit {
			break
		}
		if !in.ExpiresAt.After(now) {
			delete(s.signins, id)
			n++
		}
	}
	return n, nil
}
