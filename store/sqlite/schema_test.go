package sqlite

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/store/internal/codec"
)

var updateSchema = flag.Bool("update", false, "rewrite schema.sql and empty.db from the migrations")

// A new store is made by schema.sql, and it is the store the migrations
// make: the same tables, columns, indexes and record of what is applied.
// A new migration without schema.sql written again fails here.
func TestTheSchemaIsTheMigrations(t *testing.T) {
	ctx := context.Background()
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	replayed := testPool(t, filepath.Join(dir, "replayed.db"))
	if err := applyMigrations(ctx, replayed, ms, nil, quiet); err != nil {
		t.Fatal(err)
	}
	text := schemaFile
	if *updateSchema {
		text = dumpSchema(t, replayed, ms[len(ms)-1].Version)
		if err := os.WriteFile("schema.sql", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	schema := parseSchema(text)
	if *updateSchema {
		writeEmptyStore(t, dir, ms, schema)
	}
	if newest := ms[len(ms)-1]; schema == nil || schema.Version != newest.Version {
		t.Fatalf("schema.sql is not as of the newest migration, %s: go test ./store/sqlite -run TestTheSchemaIsTheMigrations -update", newest.Name)
	}

	made := testPool(t, filepath.Join(dir, "made.db"))
	tx, err := made.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, schemaMigrationsDDL); err != nil {
		t.Fatal(err)
	}
	done, err := applySchema(ctx, tx, ms, schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(done) != len(ms) {
		t.Fatalf("schema.sql stood for %d migrations, want all %d", len(done), len(ms))
	}
	// A start after it has nothing left to apply.
	if err := applyMigrations(ctx, made, ms, schema, quiet); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT type || ' ' || name || ' ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`,
		`SELECT version || ' ' || name FROM schema_migrations ORDER BY version`,
	} {
		if want, got := column(t, replayed, q), column(t, made, q); !slices.Equal(got, want) {
			t.Errorf("%s\nmade by schema.sql:\n  %s\nmade by the migrations:\n  %s", q, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// testPool opens the writer pool of a store at path, closed with the test.
func testPool(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := openPool(context.Background(), dsn(path, "NORMAL", roleWriter), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// column returns the one column of q's rows on db.
func column(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpSchema writes out what db's migrations made, in the order they made
// it, as schema.sql's text.
func dumpSchema(t *testing.T, db *sql.DB, version int) string {
	t.Helper()
	stmts := column(t, db, `SELECT sql FROM sqlite_master
		WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_migrations' ORDER BY rowid`)
	var b strings.Builder
	fmt.Fprintf(&b, "%s%d\n", schemaVersionPrefix, version)
	b.WriteString("-- A new store's schema: what every migration up to that one makes, in one\n" +
		"-- script. Written by `go test ./store/sqlite -run TestTheSchemaIsTheMigrations\n" +
		"-- -update`, never by hand; migrations/ stays the history a store upgrades by.\n")
	for _, s := range stmts {
		b.WriteString("\n" + s + ";\n")
	}
	return b.String()
}

// writeEmptyStore writes empty.db: a store made by schema, its
// migrations recorded undated, checkpointed into its one file.
func writeEmptyStore(t *testing.T, dir string, ms []codec.Migration, schema *codec.Migration) {
	t.Helper()
	path := filepath.Join(dir, "empty.db")
	db := testPool(t, path)
	if err := applyMigrations(context.Background(), db, ms, schema, quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_migrations SET applied_at = ''`); err != nil {
		t.Fatal(err)
	}
	// The last connection's close checkpoints the WAL into the file and
	// removes it.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("the empty store's WAL outlived its close")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("empty.db", raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A new store is a copy of the built-in empty one, and that copy is the
// store schema.sql (so the migrations) makes: same schema, same settings,
// every migration recorded, dated when the copy was made. Two daemons
// opening the same new path at once share one file.
func TestANewStoreIsACopyOfTheEmptyOne(t *testing.T) {
	ctx := context.Background()
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The copy is made in a scratch directory first: a test of seed itself.
	scratch := filepath.Join(dir, "scratch.db")
	if seeded, err := seed(scratch); err != nil || !seeded {
		t.Fatalf("seed of a new path: %v, %v; want a copy", seeded, err)
	}
	if fi, err := os.Stat(scratch); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the copy: %v, %v; want mode 0600", fi, err)
	}
	if again, err := seed(scratch); err != nil || again {
		t.Fatalf("seed over a store: %v, %v; want it left alone", again, err)
	}
	// A copy a killed process left is removed by the next seed; one being
	// made (seconds old) is not.
	stale, fresh := filepath.Join(dir, atomicfile.TempPrefix+"killed"), filepath.Join(dir, atomicfile.TempPrefix+"writing")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if made, err := seed(filepath.Join(dir, "left.db")); err != nil || !made {
		t.Fatalf("seed beside left copies: %v, %v", made, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale copy is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a copy being made was removed: %v", err)
	}
	if err := os.Remove(fresh); err != nil {
		t.Fatal(err)
	}
	orphanWAL := filepath.Join(dir, "nodb.db")
	if err := os.WriteFile(orphanWAL+"-wal", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if made, err := seed(orphanWAL); err != nil || made {
		t.Fatalf("seed beside a WAL without its database: %v, %v; want nothing made", made, err)
	}
	// A copy a migration behind would still be migrated; but a start is
	// the faster for it only when it is as of the newest.
	newest := fmt.Sprint(ms[len(ms)-1].Version)
	if got := column(t, testPool(t, scratch), `SELECT max(version) FROM schema_migrations`); !slices.Equal(got, []string{newest}) {
		t.Fatalf("empty.db is as of migration %v, not %s: go test ./store/sqlite -run TestTheSchemaIsTheMigrations -update", got, newest)
	}
	before := time.Now().UTC()
	s, err := Open(ctx, filepath.Join(dir, "new.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	made := testPool(t, filepath.Join(dir, "made.db"))
	if err := applyMigrations(ctx, made, ms, parseSchema(schemaFile), quiet); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT type || ' ' || name || ' ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`,
		`SELECT version || ' ' || name FROM schema_migrations ORDER BY version`,
		`SELECT 'journal_mode ' || journal_mode FROM pragma_journal_mode`,
		`SELECT 'page_size ' || page_size FROM pragma_page_size`,
		`SELECT 'auto_vacuum ' || auto_vacuum FROM pragma_auto_vacuum`,
		`SELECT 'encoding ' || encoding FROM pragma_encoding`,
		`SELECT 'user_version ' || user_version FROM pragma_user_version`,
		`SELECT 'application_id ' || application_id FROM pragma_application_id`,
	} {
		if want, got := column(t, made, q), column(t, s.w, q); !slices.Equal(got, want) {
			t.Errorf("%s\nthe empty store:\n  %s\nmade by schema.sql:\n  %s\n(go test ./store/sqlite -run TestTheSchemaIsTheMigrations -update)",
				q, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	// Dated beside the statements' preparation, off the open's path.
	if err := s.stmtsReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, at := range column(t, s.w, `SELECT applied_at FROM schema_migrations`) {
		if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || ts.Before(before.Add(-time.Second)) {
			t.Fatalf("a seeded store's migration is dated %q, want the time it was made", at)
		}
	}

	// Eight opens of one new path at once: every one opens the same store.
	race := filepath.Join(dir, "race.db")
	stores := make([]*Store, 8)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, race, Options{}) })
	}
	wg.Wait()
	for i, st := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer st.Close()
	}
	if _, err := stores[0].w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99999, 'x', 'y')`); err != nil {
		t.Fatal(err)
	}
	for i, st := range stores {
		if got := column(t, st.r, `SELECT name FROM schema_migrations WHERE version = 99999`); len(got) != 1 {
			t.Fatalf("open %d does not see the others' write: a second file?", i)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, atomicfile.TempPrefix+"*")); len(left) != 0 {
		t.Fatalf("copies left behind: %v", left)
	}
}
