package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
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
		`ALTER TABLE sessions DROP COLUMN root_id`, `ALTER TABLE sessions DROP COLUMN spawn_key`,
		`DELETE FROM schema_migrations WHERE version = 5`,
		`INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ('ses_old', 'stopped', 'demo', '', 1, '{"id":"ses_old","agent":"demo","state":"stopped","labels":{}}')`,
	} {
		if _, err := s.w.ExecContext(ctx, q); err != nil {
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

// A tree page and an Idempotency-Key lookup are index searches.
func TestTreeQueryPlans(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	for _, c := range []struct {
		q    string
		args []any
		want string
	}{
		{`SELECT id FROM sessions WHERE root_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 5`,
			[]any{"r", 1, "x"}, "sessions_by_root"},
		// As ListSessions writes it for a Parent and a SpawnKey.
		{`SELECT doc FROM sessions WHERE 1 = 1 AND parent_id = ? AND spawn_key = ? AND spawn_key <> '' ORDER BY created_at DESC, id DESC LIMIT 2`,
			[]any{"p", "k"}, "sessions_by_spawn_key"},
	} {
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+c.q, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, c.want) || strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", c.q, p)
		}
	}
}
