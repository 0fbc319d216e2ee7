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

// A tree page and an Idempotency-Key lookup, as ListSessions writes them,
// are index ranges, with no sort.
func TestTreeQueryPlans(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
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
		var plan []string
		err = s.pool.with(ctx, func(conn *pgx.Conn) error {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			// A generic plan is what a cached statement runs with eventually.
			if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
				return err
			}
			// An empty table would be read whole: make scans cost what they do
			// on a big one.
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+q, args...)
			if err != nil {
				return err
			}
			plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, c.want) || strings.Contains(p, "Seq Scan") || strings.Contains(p, "Sort") {
			t.Errorf("%+v: %s\n  plan:\n%s", c.f, q, p)
		}
	}
}
