package session

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// Reattach bounds: how many shims boot connects to at once, and how long
// one may take to answer. Each shim woken is a process the kernel shares
// the CPU with (each in a session, and so a scheduling group, of its
// own): at 128, the read routes of a daemon booting 1,000 sessions on 2
// vCPUs answered after 1.9-2.1 s; at 16, after 1.0-1.2 s, with every
// session active a little later (BENCHMARKS.md, "Issue 26, thirteenth
// round").
const (
	reattachParallel = 16
	reattachTimeout  = 5 * time.Second
)

// recovery takes over, at boot, what a previous daemon left: sessions
// whose agents run on in their shims (reattached), sessions it left
// active with nothing running (closed), orphaned shims (ended) and queued
// prompts (resumed).
type recovery struct {
	m *Manager
	// booted is closed once every session found live at boot is
	// reattached or closed, and the boot's clean-up is done; running
	// counts the goroutine that does it, cancel ends it.
	booted  chan struct{}
	running sync.WaitGroup
	cancel  context.CancelFunc
}

// runDirLeft is the run directory as Open found it: the previous daemon's
// shims, by bundle, and sockets with no files beside them.
type runDirLeft struct {
	bundles map[shim.Bundle]string
	strays  []shim.Bundle
}

// runDirLeftOf sorts the run directory's entries as Open read them: in the
// boot's goroutine, once the API listens, since only its last clean-up
// needs them sorted.
func (rc *recovery) runDirLeftOf(entries []os.DirEntry) runDirLeft {
	if rc.m.opts.RunDir == "" {
		return runDirLeft{}
	}
	bundles, strays := shim.ScanEntries(rc.m.opts.RunDir, entries)
	return runDirLeft{bundles, strays}
}

// start reattaches, in the background, the sessions a previous daemon
// left running in their shims, while the API serves: each session answers
// once its own reattach is over (awaitBoot), and Health counts those still
// reattaching. Sessions not reattached are closed as reconcile closes the
// lost ones; then the run directory is cleared of orphaned shims and
// sessions with queued prompts are resumed. booted is closed at the end.
func (rc *recovery) start(ctx context.Context, attach []berth.LiveSession, runEntries []os.DirEntry) {
	rc.m.set.boot(attach)
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rc.cancel = cancel
	rc.running.Add(1)
	go func() {
		defer rc.running.Done()
		defer close(rc.booted)
		defer cancel()
		rc.run(bctx, attach, runEntries)
	}()
}

// run is the boot's goroutine.
func (rc *recovery) run(ctx context.Context, attach []berth.LiveSession, runEntries []os.DirEntry) {
	t0 := time.Now()
	failed, left := rc.reattachAll(ctx, attach)
	for _, l := range left {
		// Shutdown came first: the sessions not reached are left as they
		// are, active with their shims, for the next daemon.
		rc.m.set.booted(l.ID)
	}
	if ctx.Err() == nil {
		rc.m.tools.servePending()
	}
	if len(attach) > len(left) {
		// One line for the boot: a thousand sessions log theirs at debug.
		rc.m.logger.Info("sessions reattached", "count", len(attach)-len(left)-len(failed), "failed", len(failed), "took", time.Since(t0))
	}
	if ctx.Err() != nil {
		// Shutdown came first: what was not reattached is left as it is,
		// active with its shim, for the next daemon.
		for _, s := range failed {
			rc.m.set.booted(s.ID)
		}
		return
	}
	var resume []string
	if len(failed) > 0 {
		leftovers := sessionProcesses()
		for _, s := range failed {
			if err := rc.reconcileOne(ctx, s, leftovers[s.ID]); err != nil {
				// The store failed: the session stays as it was, for the
				// next boot (or a repair) to close.
				rc.m.logger.Error("session not reattached and not closed", "session_id", s.ID, "err", err)
			} else {
				// Its agent is gone: so is its tools credential.
				rc.m.tools.revoke(s.ID, true)
				// Clients listed it active while the API served: it changed.
				rc.m.changes.publishStored(berth.ChangeSessionUpdated, rc.m.stored(s))
				if q, err := rc.m.store.ListQueue(ctx, s.ID); err == nil && len(q) > 0 {
					resume = append(resume, s.ID)
				}
			}
			rc.m.set.booted(s.ID)
		}
	}
	rc.removeOrphanShims(ctx, rc.runDirLeftOf(runEntries))
	if rc.m.opts.AfterBoot != nil {
		rc.m.opts.AfterBoot(ctx, rc.m.LiveIDs())
	}
	rc.resumeQueued(resume)
	rc.sweepCheckpoints()
}

// sweepCheckpoints removes what a daemon killed in the middle of a
// checkpoint's create, prune or delete left, and counts the trees'
// checkpoints before a turn needs them counted (docs/api.md, Checkpoints).
func (rc *recovery) sweepCheckpoints() {
	st := rc.m.opts.Checkpoints
	if st == nil {
		return
	}
	t0 := time.Now()
	n, err := st.Sweep()
	if err != nil {
		rc.m.logger.Warn("checkpoints not swept", "err", err)
		return
	}
	rc.m.logger.Debug("checkpoints swept", "removed", n, "took", time.Since(t0))
}

// recoveryRetry is how long the boot waits before it reads again what the
// store holds for the sessions to reattach, after a failed read; it
// doubles up to recoveryRetryMax.
var recoveryRetry, recoveryRetryMax = 100 * time.Millisecond, 5 * time.Second

// recoveryChunk is how many sessions one recovery read takes: the boot
// reads each chunk as the one before it reattaches, so that the first
// reattach waits for one small read, not for every session's document
// decoded (1,000 took 190-270 ms on the boot's machine, beside the
// API's first reads).
var recoveryChunk = 64

// recoveryOf reads, in one read, each session to reattach whole and what
// the store holds to carry it on; from then on a census counts it as
// read. A failed read is tried again until it works or ctx ends (false):
// a session whose read failed must not be taken for one gone from the
// store, which the boot would close.
func (rc *recovery) recoveryOf(ctx context.Context, attach []berth.LiveSession) (map[string]*berth.Recovery, bool) {
	ids := make([]string, len(attach))
	for i, s := range attach {
		ids[i] = s.ID
	}
	wait := recoveryRetry
	for {
		rec, err := rc.m.store.ListRecovery(ctx, ids)
		if err == nil {
			rc.m.set.bootRead(rec)
			return rec, true
		}
		rc.m.logger.Error("cannot read what the live sessions hold: trying again", "sessions", len(ids), "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false
		}
		wait = min(2*wait, recoveryRetryMax)
	}
}

// reattachAll reattaches sessions, reattachParallel at a time, each as
// its chunk's recovery read found it (recoveryOf) and answering requests
// as soon as its own reattach is done. It returns the sessions it could
// not reattach (one gone from the store as it was listed among them), and
// those it did not reach because ctx ended first.
func (rc *recovery) reattachAll(ctx context.Context, sessions []berth.LiveSession) (failed []*berth.Session, left []berth.LiveSession) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	sem := make(chan struct{}, reattachParallel)
	for start := 0; start < len(sessions); start += recoveryChunk {
		chunk := sessions[start:min(start+recoveryChunk, len(sessions))]
		// Read while the chunk before it reattaches; a read the API is
		// answering goes first.
		rc.m.reads.wait(ctx, readYieldMax)
		rec, ok := rc.recoveryOf(ctx, chunk)
		if !ok {
			left = sessions[start:]
			break
		}
		for _, l := range chunk {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				// A read the API is answering goes first.
				rc.m.reads.wait(ctx, readYieldMax)
				r := rec[l.ID]
				s := &berth.Session{ID: l.ID, State: l.State, ShimSocket: l.ShimSocket}
				err := errors.New("the session is gone from the store")
				if r != nil && r.Session != nil {
					s = r.Session
					err = rc.reattach(ctx, s, r)
				}
				if err != nil {
					rc.m.logger.Warn("session not reattached", "session_id", s.ID, "err", err)
					mu.Lock()
					failed = append(failed, s)
					mu.Unlock()
					return
				}
				rc.m.set.booted(s.ID)
			}()
		}
	}
	wg.Wait()
	return failed, left
}
