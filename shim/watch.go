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

// watchEvery is how often a shim looks for its run directory and its
// daemon; at most a quarter of the orphan timeout.
const watchEvery = 2 * time.Second

// watch ends the shim, stopping its agent, when nothing can ever reattach
// it: its run directory is gone (the daemon's home was deleted), or no
// daemon has attached for the orphan timeout.
func (s *server) watch() {
	defer s.wg.Done()
	every := min(watchEvery, max(s.cfg.Orphan/4, 10*time.Millisecond))
	tick := time.NewTicker(every)
	defer tick.Stop()
	runDir := filepath.Dir(s.cfg.Socket)
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
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
