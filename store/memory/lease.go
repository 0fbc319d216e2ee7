package memory

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// AcquireLease takes or renews the lease of a session for owner until
// now+ttl. A lease held by another owner that has not expired at now is
// EConflict. Taking a lease (the first, one released or one expired) gives
// it a token larger than any this store handed out before; renewing one's
// own, expired or not, keeps the token (a node that came back after it was
// lost is a new owner). A fenced Store remembers the token its node took.
// EInvalid for an empty owner, a ttl that is not positive or times out of
// range; ENotFound if the session is absent.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, now time.Time, ttl time.Duration) (*berth.Lease, error) {
	nowN, expN, err := codec.LeaseTimes(owner, now, ttl)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(sessionID)
	if err != nil {
		return nil, err
	}
	l := &berth.Lease{SessionID: sessionID, Owner: owner, ExpiresAt: codec.FromNanos(expN)}
	inc := s.incarnation(owner)
	switch held := r.lease; {
	case held == nil:
		// Nobody holds it: take it below.
	case held.Owner == owner && r.leaseInc == inc:
		// A renewal: the same holder, so the same token.
		l.Token = held.Token
		r.lease = l
		s.fence.Acquired(sessionID, owner, l.Token)
		c := *l
		return &c, nil
	case held.Owner == owner:
		// A new incarnation of the holder: a new token, below.
	case held.ExpiresAt.UnixNano() > nowN:
		return nil, &berth.Error{Code: berth.EConflict,
			Message: "session " + sessionID + " is leased by another owner",
			Details: map[string]any{"owner": held.Owner, "expires_at": held.ExpiresAt}}
	}
	s.tokens++
	l.Token = s.tokens
	r.lease, r.leaseInc = l, inc
	s.fence.Acquired(sessionID, owner, l.Token)
	c := *l
	return &c, nil
}

// GetLease returns a copy of the lease of a session, expired or not.
// ENotFound if it has none (it was never taken, or was released) or the
// session is absent.
func (s *Store) GetLease(ctx context.Context, sessionID string) (*berth.Lease, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.sessions[sessionID]
	if !ok || r.lease == nil {
		return nil, berth.Errorf(berth.ENotFound, "session %s has no lease", sessionID)
	}
	c := *r.lease
	return &c, nil
}

// ReleaseLease gives up the lease owner holds with token; the next holder
// gets a larger token all the same. A lease that expired but was not taken
// over can still be released by its holder. EConflict if the lease is held
// by another owner or with another token; ENotFound if there is none.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, owner string, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// This node no longer holds it, whatever the outcome.
	s.fence.Released(sessionID, owner)
	r, ok := s.sessions[sessionID]
	if !ok || r.lease == nil {
		return berth.Errorf(berth.ENotFound, "session %s has no lease", sessionID)
	}
	if held := r.lease; held.Owner != owner || held.Token != token {
		return &berth.Error{Code: berth.EConflict,
			Message: "the lease of session " + sessionID + " is not held with this owner and token",
			Details: map[string]any{"owner": held.Owner, "token": held.Token}}
	}
	r.lease = nil
	return nil
}
