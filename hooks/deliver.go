package hooks

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/berth-sh/berth"
)

// claimSlack is how long past a hook's timeout a claim lasts: a daemon that
// died mid-attempt leaves its deliveries to others (another node, or
// itself after a restart, which frees its claims at once) after that.
const claimSlack = 30 * time.Second

// releaseTimeout bounds the store write that hands back a delivery whose
// attempt shutdown cut.
const releaseTimeout = 2 * time.Second

// maxErrorText bounds the last_error kept for an attempt.
const maxErrorText = 512

// work is hook h's worker: it claims due deliveries, at most
// Concurrency at once, and attempts each in a goroutine of its own.
func (s *Service) work(ctx context.Context, h *hook) {
	finished := make(chan struct{}, s.o.Concurrency)
	inflight := 0
	poll := time.NewTicker(s.o.PollInterval)
	defer poll.Stop()
	defer func() {
		// Attempts end promptly once ctx is done (requests cut,
		// processes killed); the worker owns them and waits.
		for ; inflight > 0; inflight-- {
			<-finished
		}
	}()
	for {
		if free := s.o.Concurrency - inflight; free > 0 {
			now := s.o.Now()
			ds, err := s.store.ClaimHookDeliveries(ctx, h.Name, s.o.Owner, now, now.Add(h.Timeout+claimSlack), free)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("hooks: claiming deliveries failed", "hook", h.Name, "err", err)
			}
			for _, d := range ds {
				inflight++
				go func() {
					defer func() { finished <- struct{}{} }()
					s.attempt(ctx, h, d)
				}()
			}
		}
		select {
		case <-h.wake:
		case <-poll.C:
		case <-finished:
			// A session's next delivery may be due now.
			inflight--
		case <-ctx.Done():
			return
		}
	}
}

// attempt sends d once and records the outcome.
func (s *Service) attempt(ctx context.Context, h *hook, d *berth.HookDelivery) {
	actx, cancel := context.WithTimeout(ctx, h.Timeout)
	var err error
	if h.URL != "" {
		err = s.post(actx, h, d)
	} else {
		err = s.run(actx, h, d)
	}
	cancel()
	now := s.o.Now().UTC()
	// The outcome is written even when shutdown began meanwhile.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	if err != nil && ctx.Err() != nil {
		// Shutdown cut the attempt: hand the delivery back untouched, so
		// the next start tries it at once and counts nothing.
		d.NextAttemptAt = &now
		if err := s.store.FinishHookAttempt(rctx, d); err != nil {
			s.log.Warn("hooks: handing back a delivery failed", "hook", h.Name, "delivery", d.ID, "err", err)
		}
		return
	}
	d.Attempts++
	log := s.log.With("hook", h.Name, "delivery", d.ID, "session_id", d.SessionID, "event", d.Event, "attempts", d.Attempts)
	switch {
	case err == nil:
		d.State, d.DeliveredAt, d.NextAttemptAt, d.LastError = berth.DeliveryDelivered, &now, nil, ""
		s.delivered.Add(1)
		log.Debug("hooks: delivered")
	case now.Sub(d.CreatedAt) >= s.o.GiveUpAfter:
		d.State, d.NextAttemptAt, d.LastError = berth.DeliveryFailed, nil, errorText(err)
		s.failed.Add(1)
		log.Warn("hooks: delivery failed for good", "err", d.LastError)
	default:
		next := now.Add(s.backoff(d.Attempts))
		d.NextAttemptAt, d.LastError = &next, errorText(err)
		s.retried.Add(1)
		log.Info("hooks: delivery attempt failed, will retry", "err", d.LastError, "next_attempt_at", next)
	}
	if err := s.store.FinishHookAttempt(rctx, d); err != nil {
		// The claim runs out and the delivery is attempted again: at
		// least once.
		log.Warn("hooks: recording an attempt failed", "err", err)
	}
}

// backoff is the pause after the n-th failed attempt: RetryBase doubled
// n-1 times, at most RetryMax, ±20%.
func (s *Service) backoff(n int) time.Duration {
	d := s.o.RetryBase
	for i := 1; i < n && d < s.o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.o.RetryMax)
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return d + jitter
}

// errorText is an attempt's error as kept in last_error: bounded, and
// without a context's wording when the hook timed out.
func errorText(err error) string {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timed out"
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	return msg
}
