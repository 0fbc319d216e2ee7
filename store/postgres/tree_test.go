package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
	"github.com/jackc/pgx/v5"
)

// A database written before session trees (schema 4) is migrated.
func TestTreeMigrationKeepsOldSessionsAsRoots(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckTreeMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		ctx := context.Background()
		return s.(*Store).pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, q); return err })
	}, `ALTER TABLE sessions DROP COLUMN root_id, DROP COLUMN spawn_key`)
}

// A database written before migration 29 has its live sessions' shim
// sockets in their column.
func TestShimSocketMigrationFillsTheColumn(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckShimSocketMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		ctx := context.Background()
		return s.(*Store).pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, q); return err })
	}, `ALTER TABLE sessions DROP COLUMN shim_socket`)
}

// A database written before migration 30 counts its sessions by the
// tally columns the migration fills from their documents.
func TestTallyMigrationFillsTheColumns(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckTallyMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		ctx := context.Background()
		return s.(*Store).pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, q); return err })
	})
}

// A tree page and an Idempotency-Key lookup, as ListSessions writes them,
// are index ranges, with no sort.
func TestTreeQueryPlans(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	for _, c := range []struct {
		f    berth.SessionFilter
		want string
	}{
		{berth.SessionFilter{Root: "r", Limit: 5}, "sessions_by_root"},
		// sessions_by_spawn_key, or the parent's children in list order:
		// either is an index range of one parent.
		{berth.SessionFilter{Parent: "p", SpawnKey: "k", Limit: 1}, "Index Cond: (parent_id = "},
	} {
		q, args, err := listSessionsSQL(c.f, c.f.Limit)
		if err != nil {
			t.Fatal(err)
		}
		// An empty table would be read whole: make scans cost what they do
		// on a big one.
		p := explain(t, s, q, args, "enable_seqscan = off")
		if !strings.Contains(p, c.want) || strings.Contains(p, "Seq Scan") || strings.Contains(p, "Sort") {
			t.Errorf("%+v: %s\n  plan:\n%s", c.f, q, p)
		}
	}
}
