// Package pgtest gives tests databases of their own on the test PostgreSQL
// server that BERTH_TEST_POSTGRES_URL names. Without one, a test ends by
// testenv.Missing: a skip on a laptop, a failure in CI. Only tests import
// it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-sh/berth/internal/testenv"
)

// URLEnv names the test server: a PostgreSQL URL whose user may create
// and drop databases.
const URLEnv = "BERTH_TEST_POSTGRES_URL"

// ServerURL returns the URL of the test server.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(URLEnv)
	if u == "" {
		testenv.Missing(tb, "PostgreSQL", "%s is not set", URLEnv)
	}
	return u
}

// Fresh creates a new, empty database on the test server, named prefix
// and a random suffix, drops it when the test ends, and returns its URL.
func Fresh(tb testing.TB, prefix string) string {
	tb.Helper()
	base := ServerURL(tb)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	Exec(tb, base, "CREATE DATABASE "+name)
	tb.Cleanup(func() { Exec(tb, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	return Database(tb, base, name)
}

// Database returns the server URL base with its database set to name.
func Database(tb testing.TB, base, name string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", URLEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs one statement on the database at dsn.
func Exec(tb testing.TB, dsn, sql string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// TableRows returns every row of every table of c's public schema, each
// as PostgreSQL prints the row (its ::text), by table: for a test that
// looks for what a store must not keep in the clear.
func TableRows(tb testing.TB, ctx context.Context, c *pgx.Conn) map[string][]string {
	tb.Helper()
	rows, err := c.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		tb.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string][]string, len(tables))
	for _, table := range tables {
		rows, err := c.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			tb.Fatal(err)
		}
		if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}
