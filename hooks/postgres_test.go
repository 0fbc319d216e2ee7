package hooks

import (
	"context"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/berth-sh/berth/store/postgres"
)

// postgresEnv is an env over a fresh PostgreSQL database, dropped when the
// test ends.
func postgresEnv(t *testing.T) (*env, func() *env) {
	t.Helper()
	db := pgtest.Fresh(t, "berth_hooks_")
	open := func() *env {
		st, err := postgres.Open(context.Background(), db, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return &env{t: t, store: st, feed: changefeed.New(0)}
	}
	return open(), open
}

// On PostgreSQL too: events committed while no service ran are delivered
// after a restart, in order per session, retried after a failure.
func TestPostgresDeliversAfterRestartInOrder(t *testing.T) {
	e, reopen := postgresEnv(t)
	failed := false
	rc := newReceiver(t, func(n int, r request) int {
		if !failed {
			failed = true
			return 500
		}
		return 200
	})
	hk := Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}}
	e.start(testOptions(), hk)
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "the first delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	e.stop()
	e.emit("ses_a", berth.EventTurnStarted, berth.EventTurnEnded, berth.EventTurnEnded)
	e2 := reopen()
	e2.start(testOptions(), hk)
	waitFor(t, "all delivered", func() bool { return len(e2.deliveries(berth.DeliveryDelivered)) == 3 })
	var seqs []int64
	for _, r := range rc.requests() {
		seqs = append(seqs, received(t, r).Seq)
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[1] != 1 || seqs[2] != 3 || seqs[3] != 4 {
		t.Fatalf("requests for seqs %v, want [1 1 3 4]", seqs)
	}
}
