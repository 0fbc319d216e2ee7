package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// Reattach bounds: how many shims boot connects to at once, and how long
// one may take to answer.
const (
	reattachParallel = 128
	reattachTimeout  = 5 * time.Second
)

// runDirLeft is the run directory as Open found it: the previous daemon's
// shims, by bundle, and sockets with no files beside them.
type runDirLeft struct {
	bundles map[shim.Bundle]string
	strays  []shim.Bundle
}

// startBoot reattaches, in the background, the sessions a previous daemon
// left running in their shims, while the API serves: each session answers
// once its own reattach is over (awaitBoot), and Health counts those still
// reattaching. Sessions not reattached are closed as reconcile closes the
// lost ones; then the run directory is cleared of orphaned shims and
// sessions with queued prompts are resumed. booted is closed at the end.
func (m *Manager) startBoot(ctx context.Context, attach []*berth.Session, rec map[string]*berth.Recovery, left runDirLeft) {
	m.mu.Lock()
	for _, s := range attach {
		m.booting[s.ID] = make(chan struct{})
	}
	m.mu.Unlock()
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopBoot = cancel
	m.boot.Add(1)
	go func() {
		defer m.boot.Done()
		defer close(m.booted)
		defer cancel()
		m.runBoot(bctx, attach, rec, left)
	}()
}

// runBoot is the boot's goroutine.
func (m *Manager) runBoot(ctx context.Context, attach []*berth.Session, rec map[string]*berth.Recovery, left runDirLeft) {
	t0 := time.Now()
	failed := m.reattachAll(ctx, attach, rec)
	if len(attach) > 0 {
		// One line for the boot: a thousand sessions log theirs at debug.
		m.logger.Info("sessions reattached", "count", len(attach)-len(failed), "failed", len(failed), "took", time.Since(t0))
	}
	if ctx.Err() != nil {
		// Shutdown came first: what was not reattached is left as it is,
		// active with its shim, for the next daemon.
		for _, s := range failed {
			m.bootDone(s.ID)
		}
		return
	}
	var resume []string
	if len(failed) > 0 {
		leftovers := sessionProcesses()
		for _, s := range failed {
			if err := m.reconcileOne(ctx, s, leftovers[s.ID]); err != nil {
				// The store failed: the session stays as it was, for the
				// next boot (or a repair) to close.
				m.logger.Error("session not reattached and not closed", "session_id", s.ID, "err", err)
			} else {
				// Its agent is gone: so is its tools credential.
				m.revokeTools(s.ID, true)
				// Clients listed it active while the API served: it changed.
				m.publishStored(berth.ChangeSessionUpdated, m.stored(s))
				if q, err := m.store.ListQueue(ctx, s.ID); err == nil && len(q) > 0 {
					resume = append(resume, s.ID)
				}
			}
			m.bootDone(s.ID)
		}
	}
	m.removeOrphanShims(ctx, left)
	if m.opts.AfterBoot != nil {
		m.opts.AfterBoot(ctx, m.LiveIDs())
	}
	m.resumeQueued(resume)
	m.sweepCheckpoints()
}

// sweepCheckpoints removes what a daemon killed in the middle of a
// checkpoint's create, prune or delete left, and counts the trees'
// checkpoints before a turn needs them counted (docs/api.md, Checkpoints).
func (m *Manager) sweepCheckpoints() {
	st := m.opts.Checkpoints
	if st == nil {
		return
	}
	t0 := time.Now()
	n, err := st.Sweep()
	if err != nil {
		m.logger.Warn("checkpoints not swept", "err", err)
		return
	}
	m.logger.Debug("checkpoints swept", "removed", n, "took", time.Since(t0))
}

// reattachAll reattaches sessions, reattachParallel at a time, each
// answering requests as soon as its own reattach is done. It returns the
// sessions it could not reattach.
func (m *Manager) reattachAll(ctx context.Context, sessions []*berth.Session, rec map[string]*berth.Recovery) []*berth.Session {
	var (
		mu     sync.Mutex
		failed []*berth.Session
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, reattachParallel)
	for _, s := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := rec[s.ID]
			err := errors.New("the session is gone from the store")
			if r != nil {
				err = m.reattach(ctx, s, r)
			}
			if err != nil {
				m.logger.Warn("session not reattached", "session_id", s.ID, "err", err)
				mu.Lock()
				failed = append(failed, s)
				mu.Unlock()
				return
			}
			m.bootDone(s.ID)
		}()
	}
	wg.Wait()
	return failed
}

// bootDone marks a session's reattach as over, one way or the other.
func (m *Manager) bootDone(id string) {
	m.mu.Lock()
	ch := m.booting[id]
	delete(m.booting, id)
	m.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// awaitBoot waits until the session's reattach is over, if one is under
// way: a session answers nothing before it knows whether its agent is
// still there. EUnavailable if ctx ends first.
func (m *Manager) awaitBoot(ctx context.Context, id string) error {
	m.mu.Lock()
	ch := m.booting[id]
	m.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "session %s is still being reattached", id)
	}
}

// reattaching counts the sessions whose reattach is not over.
func (m *Manager) reattaching() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.booting)
}
