package sqlite

import (
	msqlite "modernc.org/sqlite"
	"modernc.org/sqlite/pcache"
)

// pages is the page cache of every SQLite connection in the process:
// modernc.org/sqlite's reference one, each connection's cache behind a
// lock of its own, instead of SQLite's pcache1.
//
// pcache1 puts every connection's pages in one group under one mutex,
// and a reader drops its whole cache whenever a write commits (WAL), so
// with a busy writer the readers free pages all the time — and the pure-
// Go allocator's free can give memory back to the kernel (madvise) while
// that mutex is held. Booting 1,000 live sessions, the session list and
// a session's events waited for it for a second and more (goroutine dumps
// of the booting daemon: blocked in pcache1Create and pcache1Truncate
// behind one madvise); see BENCHMARKS.md, "Issue 26, thirteenth round".
var pages = pcache.New()

// It must be set before the process opens its first connection; when
// something opened one first, SQLite keeps pcache1 and berth works as
// before.
func init() { _ = msqlite.RegisterPageCache(pages) }
