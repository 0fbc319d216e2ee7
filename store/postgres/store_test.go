package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/berth-sh/berth/store/storetest"
	"github.com/jackc/pgx/v5"
)

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// created remembers the test databases made by this process, so that each
// is created once and dropped once.
var created sync.Map // name → struct{}

// databaseFor returns the URL of the test database that belongs to key (a
// test directory): the same key always maps to the same database, created
// on first use and dropped when the test that created it ends.
func databaseFor(tb testing.TB, key string) string {
	tb.Helper()
	base := pgtest.ServerURL(tb)
	sum := sha256.Sum256([]byte(key))
	name := "berth_test_" + hex.EncodeToString(sum[:8])
	if _, loaded := created.LoadOrStore(name, struct{}{}); !loaded {
		pgtest.Exec(tb, base, `CREATE DATABASE `+name)
		tb.Cleanup(func() {
			pgtest.Exec(tb, base, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
			created.Delete(name)
		})
	}
	return pgtest.Database(tb, base, name)
}

// openAt opens the store of a test directory.
func openAt(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), databaseFor(tb, dir), Options{Logger: quiet, CredentialKey: testKey})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return s
}

// testKey seals the credentials of the stores openAt opens.
var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestConformance(t *testing.T) {
	pgtest.ServerURL(t)
	storetest.RunStoreTests(t, func(t *testing.T, dir string) berth.Store { return openAt(t, dir) })
}

func TestName(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	if s.Name() != "postgres" {
		t.Fatalf("Name() = %q", s.Name())
	}
}

func TestMalformedURL(t *testing.T) {
	for _, u := range []string{
		"postgres://u:secretpw@host:notaport/db",
		"postgres://u:secretpw@[::1/db",
		"host=localhost password=secretpw port=notaport",
		"",
	} {
		_, err := Open(context.Background(), u, Options{Logger: quiet})
		if berth.ErrorCode(err) != berth.EInvalid {
			t.Errorf("%q: %v, want %s", u, err, berth.EInvalid)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") || strings.Contains(berth.ErrorMessage(err), "secretpw") {
			t.Errorf("%q: the error shows the password: %v", u, err)
		}
	}
}

func TestUnreachable(t *testing.T) {
	start := time.Now()
	_, err := Open(context.Background(), "postgres://u:secretpw@127.0.0.1:1/x?sslmode=disable",
		Options{Logger: quiet, ConnectTimeout: 2 * time.Second})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Open took %v with a 2s connect timeout", took)
	}
	if berth.ErrorCode(err) != berth.EUnavailable {
		t.Fatalf("unreachable server: %v, want %s", err, berth.EUnavailable)
	}
	msg := berth.ErrorMessage(err)
	if !strings.Contains(msg, "cannot reach PostgreSQL at 127.0.0.1:1") || strings.Contains(err.Error(), "secretpw") {
		t.Fatalf("unreachable server: message %q, error %q", msg, err)
	}
}

func TestRedact(t *testing.T) {
	for conn, msg := range map[string]string{
		"postgres://u:p%40ss@h/d":                "bad p%40ss here",
		"postgres://u:a@b@h/d":                   "bad a@b here",
		"postgres://u@h/d?password=qq9&x=1":      "bad qq9 here",
		"host=h password='s p' user=u":           "bad s p here",
		"host=h password=plain user=u":           "bad plain here",
		"postgres://user:hunter2@h:5432/d?a=b#c": "cannot parse postgres://user:hunter2@h",
	} {
		if got := redact(msg, conn); strings.Contains(got, strings.Fields(msg)[1]) && !strings.HasPrefix(msg, "cannot") ||
			strings.Contains(got, "hunter2") {
			t.Errorf("redact(%q, %q) = %q", msg, conn, got)
		}
	}
}

// TestMigrationsConcurrent opens one fresh database from several goroutines
// at once: the advisory lock makes each migration run once.
func TestMigrationsConcurrent(t *testing.T) {
	u := databaseFor(t, t.TempDir())
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(context.Background(), u, Options{Logger: quiet})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent open: %v", err)
	}
	s, err := Open(context.Background(), u, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n, top int
	if err := s.queryRow(context.Background(), `SELECT count(*), max(version) FROM schema_migrations`, nil, &n, &top); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || top != ms[len(ms)-1].Version {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d up to %d", n, top, len(ms), ms[len(ms)-1].Version)
	}

	// A database from a newer berth is refused rather than misread.
	if err := s.queryRow(context.Background(), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql') RETURNING version`, nil, &top); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), u, Options{Logger: quiet}); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

// TestQueryPlans checks that every page query is an index scan of events
// that needs no sort, so its cost does not grow with the log.
// explain returns the plan PostgreSQL makes of q with args as a cached
// statement runs it eventually (a generic plan), under the settings given
// (each "name = value", set for the explain alone).
func explain(t *testing.T, s *Store, q string, args []any, settings ...string) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			for _, set := range append([]string{"plan_cache_mode = force_generic_plan"}, settings...) {
				if _, err := tx.Exec(ctx, "SET LOCAL "+set); err != nil {
					return err
				}
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+q, args...)
			if err != nil {
				return err
			}
			lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(lines, "\n")
}

func TestQueryPlans(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateSession(ctx, &berth.Session{ID: "s", State: berth.StateActive}); err != nil {
		t.Fatal(err)
	}
	plan := func(q string, args ...any) string { return explain(t, s, q, args) }
	// The index each kind's statement must use.
	index := func(k codec.PageKind) string {
		if k == codec.PageByType || k == codec.PageByTypeInTurn {
			return "events_by_type"
		}
		return "events_pkey"
	}
	for k, args := range storetest.PageStatementArgs(t) {
		q := listEventsSQL(k)
		p := plan(q, append(args, 10)...)
		if !strings.Contains(p, "Index Scan using "+index(k)+" on events") || strings.Contains(p, "Seq Scan on events") ||
			strings.Contains(p, "Sort") {
			t.Errorf("%s\n  plan:\n%s", q, p)
		}
	}
	if p := plan(turnBoundsSQL, "s", "u"); !strings.Contains(p, "turns_pkey") {
		t.Errorf("%s\n  plan:\n%s", turnBoundsSQL, p)
	}
}

// TestDeleteRemovesRows: a deleted session's rows are gone.
func TestDeleteRemovesRows(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	storetest.CheckDeleteRemovesRows(t, s, func(q string) (int, error) {
		var n int
		err := s.queryRow(context.Background(), q, nil, &n)
		return n, err
	})
}

// TestLabelListPlan checks that a label-filtered list page is a range of
// session_labels_by_pair that needs no sort, before the tables have
// statistics (as right after a burst of creates) and after, so that its
// cost does not grow with the number of sessions that carry the label.
func TestLabelListPlan(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	// Many sessions with a common label, one with a rare one, written
	// without an ANALYZE.
	fill := []string{
		`ALTER TABLE sessions SET (autovacuum_enabled = false)`,
		`ALTER TABLE session_labels SET (autovacuum_enabled = false)`,
		`INSERT INTO sessions (id, state, agent, created_at, doc)
			SELECT 's' || i, 'stopped', 'demo', i, '{}' FROM generate_series(1, 5000) AS i`,
		`INSERT INTO session_labels (session_pk, key, value, created_at, session_id)
			SELECT pk, 'bench', 'list', created_at, id FROM sessions`,
		`INSERT INTO session_labels (session_pk, key, value, created_at, session_id)
			SELECT pk, 'rare', 'yes', created_at, id FROM sessions WHERE id = 's42'`,
	}
	for _, q := range fill {
		if err := s.pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, q); return err }); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cursor := codec.EncodeCursor(2500, "s2500")
	filters := []berth.SessionFilter{
		{Labels: map[string]string{"bench": "list"}},
		{Labels: map[string]string{"bench": "list"}, Cursor: cursor},
		{Labels: map[string]string{"bench": "list"}, State: berth.StateStopped, Agent: "demo"},
		{Labels: map[string]string{"bench": "list", "rare": "yes"}, Cursor: cursor},
	}
	check := func(when string, filters []berth.SessionFilter) {
		for _, f := range filters {
			q, args, err := listSessionsSQL(f, 100)
			if err != nil {
				t.Fatal(err)
			}
			p := explain(t, s, q, args)
			if !strings.Contains(p, "using session_labels_by_pair on session_labels l") || strings.Contains(p, "Sort") {
				t.Errorf("%s, %+v:\n%s\n  plan:\n%s", when, f, q, p)
			}
		}
	}
	check("without statistics", filters)
	if err := s.pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, `ANALYZE`); return err }); err != nil {
		t.Fatal(err)
	}
	// With statistics the planner rightly starts a filter on two labels
	// from the rare one and sorts the one session it finds.
	check("with statistics", filters[:3])

	// And the pages are right: newest first, cut by the cursor.
	page, err := s.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"bench": "list"}, Cursor: cursor, Limit: 2})
	if err != nil || len(page.Sessions) != 2 || page.Sessions[0].LastSeq != 0 || page.NextCursor != codec.EncodeCursor(2498, "s2498") {
		t.Fatalf("page after the cursor: %+v, %v", page, err)
	}
}

// TestByteSlab checks that slab copies are equal, independent and never
// overwritten by an append to another one.
func TestByteSlab(t *testing.T) {
	var s byteSlab
	if e := s.copy(nil); e == nil || len(e) != 0 {
		t.Fatalf("copy of nothing = %#v, want empty and non-nil", e)
	}
	var got [][]byte
	var want []string
	for i := range 3000 {
		v := []byte(strings.Repeat(string(rune('a'+i%26)), i%50))
		if i%1000 == 999 {
			v = []byte(strings.Repeat("L", maxSlabChunk)) // its own allocation
		}
		w := string(v)
		c := s.copy(v)
		for j := range v {
			v[j] = '#' // the row buffer is reused: the copy must not follow it
		}
		got, want = append(got, c), append(want, w)
		if cap(c) != len(c) {
			t.Fatalf("copy %d has room to grow into its neighbour: len %d cap %d", i, len(c), cap(c))
		}
	}
	for i := range got {
		_ = append(got[i], 'X')
	}
	for i := range got {
		if string(got[i]) != want[i] {
			t.Fatalf("copy %d changed: %q, want %q", i, got[i], want[i])
		}
	}
}
