package sqlite

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"
)

// WAL checkpoints copy committed pages from the WAL back into the database
// file. SQLite runs them by default inside the commit that crosses
// wal_autocheckpoint pages, on the writer's time; here a background
// goroutine on its own connection does most of the copying instead
// (PASSIVE checkpoints never block the writer).
//
// Under a steady write load the background checkpoint never quite catches
// up with the end of the WAL, and SQLite only rewinds the WAL to its start
// once a checkpoint has copied all of it. So the writer keeps an
// autocheckpoint too, at a larger size: by then the background has copied
// nearly everything, the writer's checkpoint has little left to do, and
// the WAL rewinds. Measured with 500,000 events in batches of 1000: the
// WAL peaks at 18 MiB instead of 65 MiB, for about 5% of throughput.
//
// A checkpoint that copies the whole WAL makes the next write start it
// again from its first frame, and SQLite syncs the WAL's header then: an
// fsync in that write. So the background does not chase every commit: it
// checkpoints once foldCommits commits are in the WAL, or once the writes
// have paused for foldIdle, and then makes that write itself (rewind), so
// that a prompt after a pause does not pay the fsync in its commit. With
// [store] sync = "normal" an OS crash or a power loss (never a crash of
// the daemon) may lose what was committed since the last checkpoint:
// foldIdle bounds that for a quiet daemon.
const (
	// backstopCheckpointPages is the WAL size, in pages, at which the
	// writer checkpoints by itself: 16 MiB with 4 KiB pages.
	backstopCheckpointPages = 4096
	// checkpointPace is the shortest time between two background
	// checkpoints, so a busy writer is not chased after every commit.
	checkpointPace = 50 * time.Millisecond
	// foldCommits and foldIdle: see above.
	foldCommits = 32
	foldIdle    = time.Second
)

// checkpointer runs PASSIVE checkpoints after writes, at most one per
// checkpointPace. Its goroutine is owned by the Store: stop waits for it.
type checkpointer struct {
	db     *sql.DB
	logger *slog.Logger
	kick   chan struct{} // capacity 1: "something was committed"
	quit   chan struct{}
	done   chan struct{}
}

// startCheckpointer starts the checkpointer goroutine on db.
func startCheckpointer(db *sql.DB, logger *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, logger: logger, kick: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// notify tells the checkpointer that a transaction committed. It never
// blocks.
func (c *checkpointer) notify() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run checkpoints once foldCommits notifications came (then waits out
// the pace), or foldIdle after the last one. A notification that finds
// one pending counts once: the count errs low, and foldIdle catches up.
func (c *checkpointer) run() {
	defer close(c.done)
	idle := time.NewTimer(foldIdle)
	idle.Stop()
	defer idle.Stop()
	pace := time.NewTimer(checkpointPace)
	pace.Stop()
	defer pace.Stop()
	pending := 0
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
			if pending++; pending < foldCommits {
				idle.Reset(foldIdle)
				continue
			}
		case <-idle.C:
		}
		idle.Stop()
		pending = 0
		c.checkpoint()
		pace.Reset(checkpointPace)
		select {
		case <-c.quit:
			return
		case <-pace.C:
		}
	}
}

// checkpoint copies what it can of the WAL into the database file; when
// that was all of it, it rewinds the WAL too (rewind).
func (c *checkpointer) checkpoint() {
	var busy, walPages, copied int
	if err := c.db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walPages, &copied); err != nil {
		c.logger.Warn("sqlite store: checkpoint", "err", err)
		return
	}
	if busy == 0 && walPages > 0 && copied == walPages {
		c.rewind()
	}
}

// rewind makes the write that starts the WAL again from its first frame,
// so that SQLite's sync of the WAL's new header is paid here and not by
// the next commit (after a pause, a prompt's). The write is of the
// database header's user version, to the value it has: nothing changes
// but one page written. A reader still on the WAL's old frames keeps it
// from rewinding; then the next commit rewinds it, as without this.
func (c *checkpointer) rewind() {
	var v int64
	if err := c.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		c.logger.Warn("sqlite store: rewind the WAL", "err", err)
		return
	}
	if _, err := c.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		c.logger.Warn("sqlite store: rewind the WAL", "err", err)
	}
}

// stop ends the goroutine and waits for it. It is safe on a nil checkpointer.
func (c *checkpointer) stop() {
	if c == nil {
		return
	}
	close(c.quit)
	<-c.done
}
