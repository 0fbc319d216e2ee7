package shim

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DefaultOrphan is how long a shim keeps its agent with no daemon
// attached before it decides none will come back.
const DefaultOrphan = 15 * time.Minute

// watchEvery is how often a shim with no daemon attached looks for its
// run directory; at most a quarter of the orphan timeout. A look wakes a
// shim that may have slept for hours, and every shim of a daemon that
// went looks at the same time: at 2 s, 1,000 of them took a fifth of a
// core for as long as their daemon was gone, through the next one's
// reattach (BENCHMARKS.md, fifteenth round).
const watchEvery = 10 * time.Second

// watch ends the shim, stopping its agent, when nothing can ever reattach
// it: its run directory is gone (the daemon's home was deleted), or no
// daemon has attached for the orphan timeout.
//
// Only a shim with no daemon attached looks: while one is, that daemon
// decides the shim's end, and an idle session's shim arms no timer at all
// and sleeps until the agent or the daemon says something (docs/api.md,
// Agents outlive the daemon). An attach and a detach wake it
// (noteAttachLocked).
func (s *server) watch() {
	defer s.wg.Done()
	every := min(watchEvery, max(s.cfg.Orphan/4, 10*time.Millisecond))
	if s.cfg.Look > 0 {
		every = s.cfg.Look
	}
	runDir := filepath.Dir(s.cfg.Socket)
	for {
		s.mu.Lock()
		detachedAt := s.detachedAt
		s.mu.Unlock()
		var tick <-chan time.Time
		var t *time.Timer
		if !detachedAt.IsZero() {
			// The next look: the poll, or the orphan timeout if sooner.
			t = time.NewTimer(max(min(every, s.cfg.Orphan-time.Since(detachedAt)), 0))
			tick = t.C
		}
		select {
		case <-s.quit:
			stopTimer(t)
			return
		case <-s.attachNote:
			stopTimer(t)
			continue
		case <-tick:
		}
		reason := ""
		if _, err := os.Stat(runDir); errors.Is(err, fs.ErrNotExist) {
			reason = "its run directory is gone"
		}
		s.mu.Lock()
		orphaned := !s.detachedAt.IsZero() && time.Since(s.detachedAt) >= s.cfg.Orphan
		s.mu.Unlock()
		if reason == "" && orphaned {
			reason = "no daemon attached for the orphan timeout"
		}
		if reason == "" {
			continue
		}
		s.log.Warn("nothing can reattach this shim: its agent is stopped", "why", reason, "orphan_timeout", s.cfg.Orphan)
		_, _ = s.proc.Stop(context.Background(), 5*time.Second)
		s.exit()
		return
	}
}

// noteAttachLocked wakes watch after a daemon attached or detached, so it
// stops or starts looking. It never blocks: one note pending is enough.
func (s *server) noteAttachLocked() {
	select {
	case s.attachNote <- struct{}{}:
	default:
	}
}

// stopTimer stops t, if there is one.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
