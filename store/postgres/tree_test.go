package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/jackc/pgx/v5"
)

// A database written before session trees (schema 4) is migrated: its
// sessions read as roots, and ?root= finds them from the new column.
func TestTreeMigrationKeepsOldSessionsAsRoots(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ctx := context.Background()
	// Back to schema 4, with a session as berth wrote it then.
	for _, q := range []string{
		`DROP INDEX sessions_by_root`, `DROP INDEX sessions_by_spawn_key`,
		`ALTER TABLE sessions DROP COLUMN root_id, DROP COLUMN spawn_key`,
		`DELETE FROM schema_migrations WHERE version = 5`,
		`INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ('ses_old', 'stopped', 'demo', '', 1, '{"id":"ses_old","agent":"demo","state":"stopped","labels":{}}')`,
	} {
		if err := s.pool.with(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, q); return err }); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = openAt(t, dir)
	defer s.Close()
	got, err := s.GetSession(ctx, "ses_old")
	if err != nil || got.RootID != "ses_old" || got.Depth != 0 {
		t.Fatalf("old session: %+v %v", got, err)
	}
	page, err := s.ListSessions(ctx, berth.SessionFilter{Root: "ses_old"})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("?root= of an old session: %v %v", page, err)
	}
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
