package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/berth-sh/berth/store/storetest"
)

// openAt opens the store file of a test directory.
func openAt(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(dir, "db", "berth.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T, dir string) berth.Store { return openAt(t, dir) })
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

func TestPragmas(t *testing.T) {
	for _, c := range []struct {
		sync string
		want int
	}{{"", 1}, {"normal", 1}, {"full", 2}} {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), Options{Sync: c.sync, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		for name, db := range map[string]*sql.DB{"writer": s.w, "reader": s.r} {
			pragma := func(p string) string {
				var v string
				if err := db.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
					t.Fatalf("%s %s: %v", name, p, err)
				}
				return v
			}
			for p, want := range map[string]string{
				"journal_mode": "wal",
				"synchronous":  strconv.Itoa(c.want),
				"foreign_keys": "1",
				"busy_timeout": strconv.Itoa(busyTimeoutMillis),
			} {
				if got := pragma(p); got != want {
					t.Errorf("sync %q %s: %s = %s, want %s", c.sync, name, p, got, want)
				}
			}
			wantRO := map[string]string{"writer": "0", "reader": "1"}[name]
			if got := pragma("query_only"); got != wantRO {
				t.Errorf("%s: query_only = %s, want %s", name, got, wantRO)
			}
			// Readers map the file; the writer copies its pages.
			wantMmap := map[string]string{"writer": "0", "reader": strconv.Itoa(readerMmapBytes)}[name]
			if got := pragma("mmap_size"); got != wantMmap {
				t.Errorf("%s: mmap_size = %s, want %s", name, got, wantMmap)
			}
		}
		if got := s.w.Stats().MaxOpenConnections; got != 1 {
			t.Errorf("writer pool allows %d connections", got)
		}
		if _, err := s.r.Exec(`DELETE FROM sessions`); err == nil {
			t.Errorf("a reader connection could write")
		}
		s.Close()
	}
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), Options{Sync: "sometimes"})
	if berth.ErrorCode(err) != berth.EInvalid {
		t.Fatalf("bad sync: %v", err)
	}
	_, err = Open(context.Background(), ":memory:", Options{})
	if berth.ErrorCode(err) != berth.EInvalid {
		t.Fatalf("memory path: %v", err)
	}
}

func TestPathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "we?ird #dir %20")
	s, err := Open(context.Background(), filepath.Join(dir, "b.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err != nil {
		t.Fatalf("database not at the given path: %v", err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s, err := Open(context.Background(), path, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var n, top int
		if err := s.r.QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
			t.Fatal(err)
		}
		if n != len(ms) || top != ms[len(ms)-1].Version {
			t.Fatalf("schema_migrations has %d rows up to %d, want %d up to %d", n, top, len(ms), ms[len(ms)-1].Version)
		}
		s.Close()
	}

	// A database from a newer berth is refused rather than misread.
	s, err := Open(context.Background(), path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path, Options{Logger: quiet}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

// The migrations a start applies are one transaction: one that fails
// leaves the schema as it was, the ones before it in the same start (or
// a new store's schema.sql) included, and the next start applies them all.
func TestMigrationsApplyWholeOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	schema := parseSchema(schemaFile)
	bad := append(slices.Clone(ms), codec.Migration{Version: 9999, Name: "9999_broken.sql", SQL: "CREATE TABLE broken ("})
	db, err := openPool(ctx, dsn(filepath.Join(t.TempDir(), "b.db"), "NORMAL", roleWriter), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	recorded := func() (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := applyMigrations(ctx, db, bad, schema, quiet); !berth.IsCode(err, berth.EInternal) || !strings.Contains(err.Error(), "9999_broken") {
		t.Fatalf("a broken last migration: %v", err)
	}
	if n := tables(); n != 0 {
		t.Fatalf("a failed first start left %d tables", n)
	}
	// A store at an older version keeps it when its upgrade fails.
	if err := applyMigrations(ctx, db, ms[:3], schema, quiet); err != nil {
		t.Fatal(err)
	}
	before := tables()
	if err := applyMigrations(ctx, db, bad, schema, quiet); err == nil {
		t.Fatal("a broken upgrade applied")
	}
	if n, r := tables(), recorded(); n != before || r != 3 {
		t.Fatalf("after a failed upgrade: %d tables (want %d), %d migrations recorded (want 3)", n, before, r)
	}
	if err := applyMigrations(ctx, db, ms, schema, quiet); err != nil {
		t.Fatal(err)
	}
	if r := recorded(); r != len(ms) {
		t.Fatalf("%d migrations recorded, want %d", r, len(ms))
	}
}

// TestQueryPlans checks that every page query is an index range and needs
// no sort, so its cost does not grow with the log.
// explain returns SQLite's query plan of q with args: each step's detail,
// joined by "; ".
func explain(t *testing.T, s *Store, q string, args []any) string {
	t.Helper()
	rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(out, "; ")
}

func TestQueryPlans(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	plan := func(q string, args ...any) string { return explain(t, s, q, args) }
	// The index each kind's statement must use.
	index := func(k codec.PageKind) string {
		if k == codec.PageByType || k == codec.PageByTypeInTurn {
			return "events_by_type"
		}
		return "PRIMARY KEY"
	}
	for k, args := range storetest.PageStatementArgs(t) {
		q := listEventsSQL(k)
		p := plan(q, append(args, 10)...)
		if !strings.Contains(p, "SEARCH events USING") || !strings.Contains(p, index(k)) || !strings.Contains(p, "seq>?") ||
			!strings.Contains(p, "SEARCH sessions USING") || strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", q, p)
		}
	}
	if p := plan(turnBoundsSQL, "s", "u"); !strings.Contains(p, "SEARCH turns USING PRIMARY KEY") || strings.Contains(p, "SCAN") {
		t.Errorf("%s\n  plan: %s", turnBoundsSQL, p)
	}
	for _, q := range []string{
		`SELECT id FROM sessions WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 5`,
		`SELECT id FROM sessions WHERE state = 'active' AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 5`,
	} {
		if p := plan(q, 1, "x"); strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", q, p)
		}
	}
	// The queue's hot paths: claiming the oldest pending entry walks
	// queue_by_state in arrival order, and the cap is counted from the
	// index alone. A decision, a pending list and a lease are one lookup.
	for _, c := range []struct {
		q     string
		args  []any
		wants []string
	}{
		{claimQueueSQL, []any{"dispatched", "t", "s", "pending", "queue", 1, "pending"},
			[]string{"SEARCH queue_entries USING INDEX queue_by_state (session_pk=? AND state=? AND kind=?)",
				"SEARCH queue_entries USING INTEGER PRIMARY KEY", "SEARCH sessions USING"}},
		{countPendingSQL, []any{1, "pending", "queue"},
			[]string{"SEARCH queue_entries USING COVERING INDEX queue_by_state (session_pk=? AND state=? AND kind=?)"}},
		{`SELECT ` + permissionColumns + ` FROM permissions WHERE ` + permissionOfSession, []any{"s", "p"},
			[]string{"SEARCH permissions USING INDEX", "(id=?)"}},
		{`SELECT ` + permissionColumns + ` FROM permissions WHERE session_pk = ? AND state = ? ORDER BY ord`, []any{1, "pending"},
			[]string{"SEARCH permissions USING INDEX permissions_by_state (session_pk=? AND state=?)"}},
		{`SELECT owner, token, expires_at FROM leases WHERE ` + leaseOfSession, []any{"s"},
			[]string{"SEARCH leases USING INDEX", "(session_pk=?)"}},
	} {
		p := plan(c.q, c.args...)
		for _, w := range c.wants {
			if !strings.Contains(p, w) {
				t.Errorf("%s\n  plan: %s\n  want: %s", c.q, p, w)
			}
		}
		if strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", c.q, p)
		}
	}
	// A boot lists its live sessions from their own index alone: no
	// session's row is read, stopped or live.
	if p := plan(listLiveSQL); p != "SCAN sessions USING COVERING INDEX sessions_live" {
		t.Errorf("%s\n  plan: %s", listLiveSQL, p)
	}
	// A census reads the tally index alone: no session's row either.
	p := plan(countSessionsSQL, "[]")
	if strings.Count(p, "sessions USING COVERING INDEX sessions_tally") != 2 {
		t.Errorf("%s\n  plan: %s", countSessionsSQL, p)
	}
}

// TestDeleteRemovesRows: a deleted session's rows are gone.
func TestDeleteRemovesRows(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	storetest.CheckDeleteRemovesRows(t, s, func(q string) (int, error) {
		var n int
		err := s.r.QueryRow(q).Scan(&n)
		return n, err
	})
}

// The store holds every prompt and answer: its files are the daemon user's
// alone, new or left readable by an older daemon.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %s is %v, want no group or other access", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	s, err := Open(context.Background(), path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// A new store's connections open beside its Open, the WAL's and the
	// shared memory's files with them (SQLite gives them the database
	// file's mode).
	if err := s.stmtsReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("new store")
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Chmod(p, 0o644)
	}
	s, err = Open(context.Background(), path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("reopened after a chmod 0644")
}

// A store this Open made holds no session: its ListLive (a booting
// daemon's read before its API listens) answers without reading until
// the first CreateSession, then reads. A row another process slipped in
// meanwhile (which the daemon's home lock rules out) shows which.
func TestANewStoreListsNoLiveSessionWithoutAReadUntilOneIsCreated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "berth.db")
	s, err := Open(ctx, path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	other := testPool(t, path)
	if _, err := other.Exec(`INSERT INTO sessions (id, state, agent, parent_id, root_id, spawn_key, created_at, doc, shim_socket)
		VALUES ('ses_other', 'active', 'demo', '', 'ses_other', '', 1, '{}', '/run/x.sock')`); err != nil {
		t.Fatal(err)
	}
	if live, err := s.ListLive(ctx); err != nil || len(live) != 0 {
		t.Fatalf("ListLive of a store just made: %v, %v; want none, unread", live, err)
	}
	sess := &berth.Session{ID: "ses_mine", Agent: "demo", State: berth.StateActive, ShimSocket: "/run/y.sock", CreatedAt: time.Now()}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	live, err := s.ListLive(ctx)
	if err != nil || len(live) != 2 {
		t.Fatalf("ListLive once a session is created: %v, %v; want both rows read", live, err)
	}
	// Reopened, the store is not new: it reads at once.
	s.Close()
	if s, err = Open(ctx, path, Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if live, err := s.ListLive(ctx); err != nil || len(live) != 2 {
		t.Fatalf("ListLive of the store reopened: %v, %v; want both", live, err)
	}
}

// Open prepares nothing and, for a new store, opens no connection: the
// statements and their connections come with Warm, or with the first
// statement that needs them. A store closed unwarmed closes at once.
func TestStatementsWaitForWarm(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "berth.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if w, r := s.w.Stats().OpenConnections, s.r.Stats().OpenConnections; w != 0 || r != 0 || s.getSession != nil {
		t.Fatalf("before Warm: %d writer and %d reader connections, statements %v; want none", w, r, s.getSession != nil)
	}
	s.Warm()
	if err := s.stmtsReady(ctx); err != nil {
		t.Fatal(err)
	}
	if w, r := s.w.Stats().OpenConnections, s.r.Stats().OpenConnections; w == 0 || r == 0 || s.getSession == nil {
		t.Fatalf("after Warm: %d writer and %d reader connections, statements %v", w, r, s.getSession != nil)
	}
	s.Close()

	// Reopened and never warmed, the first read that needs a statement
	// warms it.
	if s, err = Open(ctx, filepath.Join(dir, "berth.db"), Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSession(ctx, "ses_none"); berth.ErrorCode(err) != berth.ENotFound {
		t.Fatalf("GetSession unwarmed: %v; want not found", err)
	}
	s.Close()
	unwarmed, err := Open(ctx, filepath.Join(dir, "other.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- unwarmed.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close of a store never warmed waits")
	}
}

// A daemon without hooks resets the hook cursors at each start: on a
// store just made there are none, and the reset opens no connection on
// the new daemon's way to its API. Once a cursor is written, it resets.
func TestANewStoreResetsNoHookCursorWithoutTheWriter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "berth.db"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ResetHookCursors(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.w.Stats().OpenConnections; n != 0 {
		t.Fatalf("the reset of a new store's cursors opened %d writer connections", n)
	}
	sess := &berth.Session{ID: "ses_a", Agent: "demo", State: berth.StateActive, CreatedAt: time.Now()}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := s.InitHookCursors(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GetHookCursor(ctx, "ses_a"); err != nil || !ok {
		t.Fatalf("cursor after init: %v %v", ok, err)
	}
	if err := s.ResetHookCursors(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GetHookCursor(ctx, "ses_a"); err != nil || ok {
		t.Fatalf("cursor after reset: %v %v; want none", ok, err)
	}
}
