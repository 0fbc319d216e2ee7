package session

import (
	"log/slog"
	"sync"

	"github.com/berth-sh/berth/internal/procfs"
)

// sweeper kills what stopped sessions left behind: processes that left the
// agent's process group (setsid, a double fork) but still carry the
// session's id. One pass over /proc costs the same for one session as for
// a thousand, so the sessions that stop while a pass runs are swept
// together by the next one.
type sweeper struct {
	logger  *slog.Logger
	mu      sync.Mutex
	pending map[string][]chan struct{}
	running bool
	// passes counts the goroutine running passes; Shutdown waits for it.
	passes sync.WaitGroup
}

// sweep kills the leftovers of session id and returns once they are dead.
func (sw *sweeper) sweep(id string) {
	done := make(chan struct{})
	sw.mu.Lock()
	if sw.pending == nil {
		sw.pending = map[string][]chan struct{}{}
	}
	sw.pending[id] = append(sw.pending[id], done)
	if !sw.running {
		sw.running = true
		sw.passes.Add(1)
		go sw.run()
	}
	sw.mu.Unlock()
	<-done
}

// run makes passes until no session waits for one.
func (sw *sweeper) run() {
	defer sw.passes.Done()
	for {
		sw.mu.Lock()
		batch := sw.pending
		sw.pending = nil
		if len(batch) == 0 {
			sw.running = false
			sw.mu.Unlock()
			return
		}
		sw.mu.Unlock()
		procs := sessionProcesses()
		for id, waiters := range batch {
			for _, pid := range procs[id] {
				if procfs.KillIfEnv(pid, "BERTH_SESSION_ID="+id, false) {
					sw.logger.Warn("killed a process the session left behind", "session_id", id, "pid", pid)
				}
			}
			for _, w := range waiters {
				close(w)
			}
		}
	}
}
