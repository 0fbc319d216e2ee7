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
	"testing"

	"github.com/berth-sh/berth/store/internal/codec"
)

var updateSchema = flag.Bool("update", false, "rewrite schema.sql from the migrations")

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
