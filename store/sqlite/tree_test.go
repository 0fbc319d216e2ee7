package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
)

// A database written before session trees (schema 4) is migrated.
func TestTreeMigrationKeepsOldSessionsAsRoots(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckTreeMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		_, err := s.(*Store).w.ExecContext(context.Background(), q)
		return err
	}, `ALTER TABLE sessions DROP COLUMN root_id`, `ALTER TABLE sessions DROP COLUMN spawn_key`)
}

// A database written before migration 29 has its live sessions' shim
// sockets in their column.
func TestShimSocketMigrationFillsTheColumn(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckShimSocketMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		_, err := s.(*Store).w.ExecContext(context.Background(), q)
		return err
	}, `ALTER TABLE sessions DROP COLUMN shim_socket`)
}

// A database written before migration 30 counts its sessions by the
// tally columns the migration fills from their documents.
func TestTallyMigrationFillsTheColumns(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckTallyMigration(t, func() berth.Store { return openAt(t, dir) }, func(s berth.Store, q string) error {
		_, err := s.(*Store).w.ExecContext(context.Background(), q)
		return err
	}, `DROP INDEX sessions_tally`)
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
		p := explain(t, s, c.q, c.args)
		if !strings.Contains(p, c.want) || strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", c.q, p)
		}
	}
}
