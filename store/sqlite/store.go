// Package sqlite implements berth.Store on an SQLite database file, with the
// pure-Go driver modernc.org/sqlite.
//
// The database runs in WAL mode. All writes go through one connection (SQLite
// allows one writer at a time; queueing in Go is cheaper than SQLITE_BUSY
// retries), and reads use a separate pool of query_only connections, so
// readers never wait for the writer and never block it. A background
// goroutine checkpoints the WAL on a connection of its own, so commits
// seldom pay for checkpoints (see checkpoint.go).
//
// Only one process should open a database at a time: the event log writer
// above this store keeps per-session sequence numbers in memory.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/berth-sh/berth/store/internal/credtable"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Name is the backend name Store.Name reports.
const Name = "sqlite"

// walSizeLimit is the size the WAL file is truncated to when it rewinds.
const walSizeLimit = 64 << 20

// readerMmapBytes is how much of the database file a reader maps rather
// than copies into its page cache: a boot's first list of 1,000 sessions
// reads 34–60 ms mapped against 63–102 ms copied (the copies fault in a
// fresh page cache; warm, both take ~24 ms). The writer copies, as
// before. A mapping is address space, not memory: the pages are the file's
// in the kernel's page cache, shared with the other readers.
const readerMmapBytes = 256 << 20

// busyTimeoutMillis bounds how long a connection waits for a lock held by
// another connection (a checkpoint, another process) before SQLITE_BUSY.
const busyTimeoutMillis = 10000

// Options tune a Store.
type Options struct {
	// Sync is the durability level: "normal" (the default) loses at most
	// the last transactions on power loss but never corrupts; "full" syncs
	// the WAL on every commit.
	Sync string
	// Logger receives the store's diagnostics. nil discards them.
	Logger *slog.Logger
}

// Store is a berth.Store backed by one SQLite database file. It is safe for
// concurrent use.
type Store struct {
	path   string
	logger *slog.Logger
	w      *sql.DB // the one writer connection
	r      *sql.DB // the pool of query_only readers
	ckpt   *sql.DB // the connection of the checkpointer

	checkpointer *checkpointer
	// empty is set while a store this Open made (seed.go) holds no
	// session: until CreateSession's first, ListLive answers without a
	// read (a new home's daemon then touches no connection on its way to
	// its API).
	empty atomic.Bool
	// noHookCursors is set while a store this Open made holds no hook
	// cursor (the built-in empty store has none, and every write of the
	// hook tables is an inWriteTx, which clears it): a daemon without
	// hooks then resets none without opening the writer.
	noHookCursors atomic.Bool
	// The credentials, kept in their own file (credential.go): their
	// methods are the store's (berth.CredentialStore).
	*credentials

	// prepared closes once the statements below are prepared (or failed
	// to be, prepareErr) by Warm's goroutine, so that a daemon's start
	// does not wait for it (stmtsReady waits); warmOnce starts it, or
	// closes prepared at a Close before any Warm. seeded says Open made
	// the store (its migrations are dated there).
	prepared   chan struct{}
	prepareErr error
	warmOnce   sync.Once
	seeded     bool
	// Statements prepared once (Warm), so hot paths skip parsing.
	insertEvents [len(insertChunks)]*sql.Stmt // by index in insertChunks
	bumpLastSeq  *sql.Stmt
	listEvents   [codec.PageKinds]*sql.Stmt
	// turnBoundsStmt finds the seq range of a turn; upsertTurn widens it.
	turnBoundsStmt *sql.Stmt
	upsertTurn     *sql.Stmt
	lastSeq        *sql.Stmt
	getSession     *sql.Stmt
	// updateSession writes a session's record, [1] only from a given
	// state; deleteLabels clears its labels before they are written again.
	updateSession [2]*sql.Stmt
	deleteLabels  *sql.Stmt
	// addOwnUsage and addTreeUsage count a model call (usage.go).
	addOwnUsage, addTreeUsage *sql.Stmt

	closeOnce sync.Once
	closeErr  error
}

var _ berth.Store = (*Store)(nil)

// Open opens the database at path, applies pending migrations and
// returns the store. A missing database (and its parent directories) is
// created, as a copy of the built-in empty store (seed.go). EInvalid for
// bad options.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	synchronous, err := syncPragma(opts.Sync)
	if err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, berth.Errorf(berth.EInvalid, "sqlite store needs a file path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "sqlite store path")
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "create the store directory")
	}
	// A new store is a copy of the built-in empty one (seed.go).
	seeded, err := seed(abs)
	if err != nil {
		return nil, err
	}
	if err := privateFiles(abs); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if seeded {
		logger.Info("sqlite store: made from the built-in empty store", "path", abs, "version", parseSchema(schemaFile).Version)
	}
	s := &Store{path: abs, logger: logger, credentials: credtable.New(credFile{path: CredentialsPath(abs)})}

	if seeded {
		// A copy of the built-in empty store is in WAL mode and as of this
		// berth's newest migration: nothing to switch or migrate, and the
		// dating of its migrations waits for Warm. Its writer connects
		// when first used too, on Warm's goroutine or later, rather
		// than on the daemon's way to its API (a connection's first
		// statement parses the schema: milliseconds each).
		s.w = lazyPool(dsn(abs, synchronous, roleWriter), 1)
		s.empty.Store(true)
		s.noHookCursors.Store(true)
	} else {
		// The writer comes first: it switches the file to WAL and
		// migrates it before any reader looks at the schema.
		if s.w, err = openPool(ctx, dsn(abs, synchronous, roleWriter), 1); err != nil {
			return nil, err
		}
		if err := migrate(ctx, s.w, logger); err != nil {
			s.w.Close()
			return nil, err
		}
	}
	// The file is in WAL mode and migrated: the readers and the
	// checkpointer connect when first used.
	s.r = lazyPool(dsn(abs, synchronous, roleReader), readerConns())
	s.ckpt = lazyPool(dsn(abs, synchronous, roleCheckpointer), 1)
	s.checkpointer = startCheckpointer(s.ckpt, logger)
	// Parsing the hot paths' statements (and a reader's first connection)
	// takes a start 3–8 ms: off its path, on Warm's goroutine.
	s.prepared = make(chan struct{})
	s.seeded = seeded
	return s, nil
}

// Warm prepares the hot paths' statements, opening the connections they
// run on (and dates a new store's migrations), on a goroutine of its own:
// a daemon calls it once the more urgent part of its start is done, and
// the first statement that needs them calls it too. It is idempotent.
func (s *Store) Warm() {
	s.warmOnce.Do(func() {
		go func() {
			defer close(s.prepared)
			ctx := context.Background()
			if s.prepareErr = s.prepare(ctx); s.prepareErr != nil {
				s.logger.Error("sqlite store: cannot prepare its statements", "err", s.prepareErr)
			}
			if s.seeded {
				// Undated, a migration is dated by the next open's migrate.
				if err := dateMigrations(ctx, s.w); err != nil {
					s.logger.Warn("sqlite store: cannot date its migrations", "err", err)
				}
			}
		}()
	})
}

// stmtsReady waits until the statements are prepared (Warm): their
// error, or ctx's.
func (s *Store) stmtsReady(ctx context.Context) error {
	s.Warm()
	select {
	case <-s.prepared:
		return s.prepareErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readerConns sizes the reader pool: reads are CPU-bound, so one per
// core, at least 4 so a few slow pages cannot starve the rest, and at most
// 16 to bound the page caches.
func readerConns() int { return min(max(4, runtime.NumCPU()), 16) }

// openPool opens a connection pool of at most n connections and checks
// that its first connection opens with the DSN's settings.
func openPool(ctx context.Context, dsn string, n int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "open the store")
	}
	sizePool(db, n)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, berth.WrapError(berth.EInternal, err, "open the store")
	}
	return db, nil
}

// lazyPool is a pool like openPool's that opens its first connection
// when first used. The DSN is one openPool has checked: sql.Open of the
// sqlite driver fails only on an unknown driver name.
func lazyPool(dsn string, n int) *sql.DB {
	db, _ := sql.Open("sqlite", dsn)
	sizePool(db, n)
	return db
}

// sizePool keeps up to n connections open for good.
func sizePool(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// syncPragma maps Options.Sync to the value of PRAGMA synchronous.
func syncPragma(v string) (string, error) {
	switch strings.ToLower(v) {
	case "", "normal":
		return "NORMAL", nil
	case "full":
		return "FULL", nil
	}
	return "", berth.Errorf(berth.EInvalid, "sqlite sync must be normal or full, not %q", v)
}

// poolRole says what a connection pool is for.
type poolRole int

// The pools of a Store.
const (
	roleWriter poolRole = iota
	roleReader
	roleCheckpointer
)

// dsn builds the data source name of a pool. The _pragma parameters run on
// every new connection, so a connection that database/sql opens later gets
// the same settings as the first.
func dsn(path, synchronous string, role poolRole) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis))
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", "cache_size(-16384)") // 16 MiB of page cache per connection
	q.Set("_journal_mode", "WAL")
	switch role {
	case roleWriter:
		// The writer takes the write lock at BEGIN, so a transaction never
		// fails halfway on a lock upgrade when another process holds it.
		q.Set("_txlock", "immediate")
		// Checkpoints are mostly the checkpointer's job, off the commit
		// path; see checkpoint.go.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", backstopCheckpointPages))
		// A WAL that grew (a long read held it) is cut back when it rewinds.
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	case roleReader:
		q.Set("_query_only", "1")
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", readerMmapBytes))
	case roleCheckpointer:
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// It rewinds the WAL too (checkpoint.go): the same cut.
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	}
	return "file:" + uriPath(path) + "?" + q.Encode()
}

// uriPath escapes the characters that end or quote the path of an SQLite
// URI filename.
func uriPath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(p))
}

// prepare compiles the statements of the hot paths.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	prep := func(db *sql.DB, q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, q)
		return st
	}
	// The readers' first: a boot's own reads use the writer meanwhile
	// (ListLive).
	s.turnBoundsStmt = prep(s.r, turnBoundsSQL)
	for k := range s.listEvents {
		s.listEvents[k] = prep(s.r, listEventsSQL(codec.PageKind(k)))
	}
	s.lastSeq = prep(s.r, lastSeqSQL)
	s.getSession = prep(s.r, getSessionSQL)
	for i, n := range insertChunks {
		s.insertEvents[i] = prep(s.w, insertEventsSQL(n))
	}
	s.bumpLastSeq = prep(s.w, bumpLastSeqSQL)
	s.upsertTurn = prep(s.w, upsertTurnSQL)
	s.updateSession[0] = prep(s.w, updateSessionSQL)
	s.updateSession[1] = prep(s.w, updateSessionSQL+updateFromSQL)
	s.deleteLabels = prep(s.w, deleteLabelsSQL)
	s.addOwnUsage = prep(s.w, addOwnUsageSQL)
	s.addTreeUsage = prep(s.w, addTreeUsageSQL)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "prepare store statements")
	}
	return nil
}

// Name reports "sqlite".
func (s *Store) Name() string { return Name }

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close waits for running statements, lets SQLite refresh its planner
// statistics and releases the database. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// Never warmed: nothing to wait for, and nothing to prepare now.
		s.warmOnce.Do(func() {
			s.prepareErr = berth.Errorf(berth.EUnavailable, "the store is closed")
			close(s.prepared)
		})
		<-s.prepared
		s.checkpointer.stop()
		// optimize is cheap when there is nothing to do, and the final
		// checkpoint leaves an empty WAL behind; failures cost only planner
		// quality or disk space, so they are logged and not returned.
		for _, p := range []string{"PRAGMA analysis_limit = 400", "PRAGMA optimize", "PRAGMA wal_checkpoint(TRUNCATE)"} {
			if _, err := s.w.Exec(p); err != nil {
				s.logger.Warn("sqlite store: on close", "pragma", p, "err", err)
			}
		}
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

// closeDBs closes every prepared statement and both pools.
func (s *Store) closeDBs() error {
	var errs []error
	stmts := []*sql.Stmt{s.bumpLastSeq, s.lastSeq, s.getSession}
	stmts = append(stmts, s.listEvents[:]...)
	stmts = append(stmts, s.turnBoundsStmt, s.upsertTurn, s.addOwnUsage, s.addTreeUsage)
	stmts = append(stmts, s.insertEvents[:]...)
	stmts = append(stmts, s.updateSession[:]...)
	stmts = append(stmts, s.deleteLabels)
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, db := range []*sql.DB{s.ckpt, s.r, s.w} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return berth.WrapError(berth.EInternal, err, "close the store")
	}
	return nil
}

// privateFiles makes the database file 0600 before SQLite opens it: created
// empty with that mode when missing (SQLite gives its -wal and -shm files
// the database's mode), tightened when an older daemon left it, or its
// -wal or -shm, readable by others. They hold every prompt and answer.
func privateFiles(db string) error {
	f, err := os.OpenFile(db, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "create the store file")
	}
	f.Close()
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return berth.WrapError(berth.EInternal, err, "make the store file private")
			}
		}
	}
	return nil
}
