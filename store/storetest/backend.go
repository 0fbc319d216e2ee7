package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// CheckDeleteRemovesRows checks what the API cannot see: a deleted
// session's rows are gone, not just unreachable. It gives two sessions
// labels, events of a turn, queue entries, a permission and a lease,
// deletes one, and asks count, which runs a `SELECT count(*)` of the SQL
// backend, how many rows each table keeps: the other session's alone.
func CheckDeleteRemovesRows(t *testing.T, s berth.Store, count func(query string) (int, error)) {
	for _, id := range []string{"gone", "kept"} {
		create(t, s, &berth.Session{ID: id, State: berth.StateActive, Labels: map[string]string{"k": "v"}})
		appendOK(t, s, []berth.Event{{SessionID: id, Seq: 1, Type: "x", TurnID: "t"}, {SessionID: id, Seq: 2, Type: "y"}})
		for _, kind := range []string{berth.EntryQueue, berth.EntrySteer} {
			enqueue(t, s, &berth.QueueEntry{ID: id + "-" + kind, SessionID: id, Kind: kind}, 10)
		}
		if err := s.CreatePermission(ctx(t), &berth.Permission{ID: id + "-p", SessionID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireLease(ctx(t), id, "n", time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int{
		"events": 2, "turns": 1, "session_labels": 1, "sessions": 1, "queue_entries": 2, "permissions": 1, "leases": 1,
	} {
		q := `SELECT count(*) FROM ` + table
		n, err := count(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
}

// CheckTreeMigration checks that a database written before session trees
// (schema 4) is migrated: its sessions read as roots, and ?root= finds
// them from the new column. open opens the test's database (again); exec
// runs a statement on it, to take it back to schema 4 with dropColumns
// and to write a session as berth wrote it then.
func CheckTreeMigration(t *testing.T, open func() berth.Store, exec func(s berth.Store, q string) error, dropColumns ...string) {
	s := open()
	back := append([]string{`DROP INDEX sessions_by_root`, `DROP INDEX sessions_by_spawn_key`}, dropColumns...)
	back = append(back, `DELETE FROM schema_migrations WHERE version = 5`,
		`INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ('ses_old', 'stopped', 'demo', '', 1, '{"id":"ses_old","agent":"demo","state":"stopped","labels":{}}')`)
	for _, q := range back {
		if err := exec(s, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open()
	defer s.Close()
	got, err := s.GetSession(ctx(t), "ses_old")
	if err != nil || got.RootID != "ses_old" || got.Depth != 0 {
		t.Fatalf("old session: %+v %v", got, err)
	}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Root: "ses_old"})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("?root= of an old session: %v %v", page, err)
	}
}

// CheckShimSocketMigration checks that migration 29 fills the shim_socket
// column of a database written before it from each session's document:
// the live sessions a boot lists name their shims. exec runs a statement
// on the backend; dropColumn undoes the migration's column.
func CheckShimSocketMigration(t *testing.T, open func() berth.Store, exec func(s berth.Store, q string) error, dropColumn string) {
	s := open()
	for _, q := range []string{`DROP INDEX sessions_live`, dropColumn, `DELETE FROM schema_migrations WHERE version = 29`,
		`INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ('ses_live', 'active', 'demo', '', 1, '{"id":"ses_live","agent":"demo","state":"active","labels":{},"shim_socket":"/run/berth/live.sock"}')`,
		`INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ('ses_gone', 'stopped', 'demo', '', 2, '{"id":"ses_gone","agent":"demo","state":"stopped","labels":{}}')`,
	} {
		if err := exec(s, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open()
	defer s.Close()
	live, err := s.ListLive(ctx(t))
	want := []berth.LiveSession{{ID: "ses_live", State: berth.StateActive, ShimSocket: "/run/berth/live.sock"}}
	if err != nil || !reflect.DeepEqual(live, want) {
		t.Fatalf("ListLive after the migration = %+v, %v; want %+v", live, err, want)
	}
}
