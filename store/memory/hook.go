package memory

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.HookStore = (*Store)(nil)

// hookState is the hooks' outbox: deliveries in arrival order and the
// cursors of the sessions.
type hookState struct {
	deliveries []*delivery // by ord, ascending
	byID       map[string]*delivery
	// keys holds the (hook, session, seq, event) of every delivery: a
	// second delivery of the same is skipped.
	keys    map[deliveryKey]struct{}
	ord     int64
	cursors map[string]berth.HookCursor
	// cursorsSet says InitHookCursors ran since the last reset.
	cursorsSet bool
}

// deliveryKey is what makes a delivery unique besides its id.
type deliveryKey struct {
	hook, session string
	seq           int64
	event         string
}

// delivery is a stored delivery, its times in unix nanoseconds as the SQL
// stores keep them, with the claim on it.
type delivery struct {
	d            berth.HookDelivery // State, Attempts, LastError and the ids; times below
	next         int64
	created      int64
	delivered    *int64
	claimedBy    string
	claimedUntil int64
}

// newHookState returns an empty outbox.
func newHookState() hookState {
	return hookState{byID: map[string]*delivery{}, keys: map[deliveryKey]struct{}{}, cursors: map[string]berth.HookCursor{}}
}

// key is the unique key of a delivery.
func (d *delivery) key() deliveryKey {
	return deliveryKey{d.d.Hook, d.d.SessionID, d.d.Seq, d.d.Event}
}

// out returns a copy of the delivery as the store gives it out.
func (d *delivery) out() *berth.HookDelivery {
	c := d.d
	c.Body = bytes.Clone(d.d.Body)
	c.CreatedAt = codec.FromNanos(d.created)
	c.NextAttemptAt, c.DeliveredAt = nil, nil
	if c.State == berth.DeliveryPending {
		at := codec.FromNanos(d.next)
		c.NextAttemptAt = &at
	}
	if d.delivered != nil {
		at := codec.FromNanos(*d.delivered)
		c.DeliveredAt = &at
	}
	return &c
}

// hookNanos is t as stored: unix nanoseconds, clamped into range.
func hookNanos(t time.Time) int64 { return codec.SortNanos(t) }

// InitHookCursors implements berth.HookStore.
func (s *Store) InitHookCursors(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	if h.cursorsSet {
		return nil
	}
	for id, r := range s.sessions {
		c, ok := h.cursors[id]
		if !ok {
			c = berth.HookCursor{Seq: r.lastSeq, Badge: berth.BadgeUnknown}
		}
		c.Seq = max(c.Seq, r.lastSeq)
		h.cursors[id] = c
	}
	h.cursorsSet = true
	return nil
}

// ResetHookCursors implements berth.HookStore.
func (s *Store) ResetHookCursors(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.hooks.cursors)
	s.hooks.cursorsSet = false
	return nil
}

// GetHookCursor implements berth.HookStore.
func (s *Store) GetHookCursor(ctx context.Context, sessionID string) (berth.HookCursor, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.hooks.cursors[sessionID]
	return c, ok, nil
}

// EnqueueHookDeliveries implements berth.HookStore. A delivery whose id
// is taken by another delivery is EInternal (the SQL stores' unique
// constraint), and then nothing is stored.
func (s *Store) EnqueueHookDeliveries(ctx context.Context, sessionID string, c berth.HookCursor, ds []*berth.HookDelivery) error {
	if err := codec.CheckDeliveries(ds); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	// First the checks, then the changes: all or nothing.
	add := make([]*delivery, 0, len(ds))
	keys := map[deliveryKey]struct{}{}
	ids := map[string]struct{}{}
	for _, d := range ds {
		next := d.CreatedAt
		if d.NextAttemptAt != nil {
			next = *d.NextAttemptAt
		}
		nd := &delivery{d: *d, next: hookNanos(next), created: hookNanos(d.CreatedAt)}
		nd.d.Body = bytes.Clone(d.Body)
		nd.d.State, nd.d.Attempts, nd.d.LastError = berth.DeliveryPending, 0, ""
		nd.d.NextAttemptAt, nd.d.DeliveredAt = nil, nil
		k := nd.key()
		_, stored := h.keys[k]
		_, batched := keys[k]
		if stored || batched {
			continue
		}
		_, storedID := h.byID[d.ID]
		_, batchedID := ids[d.ID]
		if storedID || batchedID {
			return berth.Errorf(berth.EInternal, "enqueue hook deliveries: delivery id %s is taken", d.ID)
		}
		keys[k], ids[d.ID] = struct{}{}, struct{}{}
		add = append(add, nd)
	}
	for _, nd := range add {
		h.ord++
		nd.d.Ord = h.ord
		h.deliveries = append(h.deliveries, nd)
		h.byID[nd.d.ID] = nd
		h.keys[nd.key()] = struct{}{}
	}
	for _, d := range ds {
		d.State = berth.DeliveryPending
	}
	cur, ok := h.cursors[sessionID]
	if !ok {
		cur = c
	}
	cur.Seq = max(cur.Seq, c.Seq)
	if c.Badge != "" {
		cur.Badge = c.Badge
	}
	h.cursors[sessionID] = cur
	return nil
}

// ClaimHookDeliveries implements berth.HookStore.
func (s *Store) ClaimHookDeliveries(ctx context.Context, hook, owner string, now, until time.Time, n int) ([]*berth.HookDelivery, error) {
	if n <= 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nowN := hookNanos(now)
	// Only the oldest pending delivery of each session may go.
	heads := map[string]bool{}
	var due []*delivery
	for _, d := range s.hooks.deliveries {
		if d.d.Hook != hook || d.d.State != berth.DeliveryPending || heads[d.d.SessionID] {
			continue
		}
		heads[d.d.SessionID] = true
		if d.next <= nowN && d.claimedUntil <= nowN {
			due = append(due, d)
		}
	}
	// The most overdue first, then by arrival (due is in arrival order).
	slices.SortStableFunc(due, func(a, b *delivery) int { return cmp.Compare(a.next, b.next) })
	due = due[:min(n, len(due))]
	out := make([]*berth.HookDelivery, 0, len(due))
	for _, d := range due {
		out = append(out, d.out())
		d.claimedBy, d.claimedUntil = owner, hookNanos(until)
	}
	return out, nil
}

// FinishHookAttempt implements berth.HookStore.
func (s *Store) FinishHookAttempt(ctx context.Context, d *berth.HookDelivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sd, ok := s.hooks.byID[d.ID]
	if !ok {
		return berth.Errorf(berth.ENotFound, "hook delivery %s not found", d.ID)
	}
	sd.d.State, sd.d.Attempts, sd.d.LastError = d.State, d.Attempts, d.LastError
	sd.next, sd.delivered = 0, nil
	if d.NextAttemptAt != nil {
		sd.next = hookNanos(*d.NextAttemptAt)
	}
	if d.DeliveredAt != nil {
		at := hookNanos(*d.DeliveredAt)
		sd.delivered = &at
	}
	sd.claimedBy, sd.claimedUntil = "", 0
	return nil
}

// ReleaseHookClaims implements berth.HookStore.
func (s *Store) ReleaseHookClaims(ctx context.Context, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.hooks.deliveries {
		if d.claimedBy == owner && d.d.State == berth.DeliveryPending {
			d.claimedBy, d.claimedUntil = "", 0
		}
	}
	return nil
}

// ListHookDeliveries implements berth.HookStore.
func (s *Store) ListHookDeliveries(ctx context.Context, f berth.HookDeliveryFilter) (*berth.HookDeliveryPage, error) {
	limit, before, err := codec.DeliveryPage(f)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ds := s.hooks.deliveries
	// Newest first, from the first delivery below the cursor.
	i, _ := slices.BinarySearchFunc(ds, before, func(d *delivery, ord int64) int {
		switch {
		case d.d.Ord < ord:
			return -1
		case d.d.Ord > ord:
			return 1
		}
		return 0
	})
	page := &berth.HookDeliveryPage{Deliveries: []*berth.HookDelivery{}}
	for i--; i >= 0; i-- {
		d := ds[i]
		if (f.State != "" && d.d.State != f.State) || (f.SessionID != "" && d.d.SessionID != f.SessionID) {
			continue
		}
		if len(page.Deliveries) == limit {
			page.NextCursor = strconv.FormatInt(page.Deliveries[limit-1].Ord, 10)
			break
		}
		page.Deliveries = append(page.Deliveries, d.out())
	}
	return page, nil
}

// PruneHookDeliveries implements berth.HookStore. A keepDelivered of 0
// or less keeps any number, as in the SQL stores.
func (s *Store) PruneHookDeliveries(ctx context.Context, deliveredBefore time.Time, keepDelivered int, failedBefore time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	deliveredN, failedN := hookNanos(deliveredBefore), hookNanos(failedBefore)
	gone := map[*delivery]bool{}
	var delivered []*delivery // the delivered ones that stay, oldest first
	for _, d := range h.deliveries {
		switch {
		case d.d.State == berth.DeliveryDelivered && d.delivered != nil && *d.delivered < deliveredN,
			d.d.State == berth.DeliveryFailed && d.created < failedN:
			gone[d] = true
		case d.d.State == berth.DeliveryDelivered:
			delivered = append(delivered, d)
		}
	}
	// Past the newest keepDelivered, delivered ones go too.
	if keepDelivered > 0 && len(delivered) > keepDelivered {
		for _, d := range delivered[:len(delivered)-keepDelivered] {
			gone[d] = true
		}
	}
	if len(gone) > 0 {
		h.deliveries = slices.DeleteFunc(h.deliveries, func(d *delivery) bool { return gone[d] })
		for d := range gone {
			delete(h.byID, d.d.ID)
			delete(h.keys, d.key())
		}
	}
	for id := range h.cursors {
		if _, ok := s.sessions[id]; !ok {
			delete(h.cursors, id)
		}
	}
	return int64(len(gone)), nil
}
