package pgtest

import (
	"strings"
	"testing"
)

// Fresh makes a database that takes tables and is gone once its test
// ended; another Fresh is another database.
func TestFreshIsAnEmptyDatabaseOfItsOwn(t *testing.T) {
	var first string
	t.Run("make", func(t *testing.T) {
		first = Fresh(t, "berth_pgtest_")
		Exec(t, first, "CREATE TABLE t (x int)")
		if second := Fresh(t, "berth_pgtest_"); second == first {
			t.Fatalf("two Fresh databases share %s", first)
		}
	})
	if t.Failed() || t.Skipped() {
		return
	}
	// The first is dropped: creating a table in it no longer connects.
	name := first[strings.LastIndex(first, "/")+1:]
	probe := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Exec(probe, first, "SELECT 1")
	}()
	if !probe.failed {
		t.Errorf("database %s still answers after its test ended", name)
	}
}

// Database sets the database of a server URL and keeps the rest.
func TestDatabase(t *testing.T) {
	got := Database(t, "postgres://u:p@db:5432/postgres?sslmode=disable", "other")
	if got != "postgres://u:p@db:5432/other?sslmode=disable" {
		t.Errorf("Database = %s", got)
	}
}

// recorder is a testing.TB whose Fatalf records the failure and stops
// the function that called it (a panic the caller recovers), without
// failing the test it wraps.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	panic("fatal")
}
