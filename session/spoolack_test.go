package session

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// counted marks the context of the calls getCounter counts.
type counted struct{}

// getCounter counts the store's GetSession calls made with a context
// marked counted: the test's own, not the daemon's other reads.
type getCounter struct {
	berth.Store
	gets atomic.Int64
}

func (s *getCounter) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	if ctx.Value(counted{}) != nil {
		s.gets.Add(1)
	}
	return s.Store.GetSession(ctx, id)
}

// The spool ack asks the store about, and wakes, only the shims of
// sessions the supervisor looked at (each tick those that changed) whose
// log committed something since it last looked: an idle session costs it
// nothing (docs/api.md, Agents outlive the daemon), and a new turn's
// output is still acked.
func TestSpoolAckLeavesIdleSessionsAlone(t *testing.T) {
	counter := &getCounter{}
	e := &env{t: t, home: t.TempDir(), wrap: func(s berth.Store) berth.Store { counter.Store = s; return counter }}
	e.open(withShims(e.home))
	t.Cleanup(e.close)
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "echo one")
	// The test acks in the supervisor's stead.
	e.m.supervisor.stop()
	e.m.supervisor.running.Wait()
	ctx := context.WithValue(context.Background(), counted{}, true)
	acks := func() int64 {
		before := counter.gets.Load()
		e.m.supervisor.once(time.Now())
		e.m.supervisor.ackSpools(ctx)
		return counter.gets.Load() - before
	}
	if n := acks(); n != 1 {
		t.Fatalf("the first ack read the store %d times, want 1", n)
	}
	for range 3 {
		if n := acks(); n != 0 {
			t.Fatalf("an ack of an idle session read the store %d times, want 0", n)
		}
	}
	e.prompt(s.ID, "echo two")
	if n := acks(); n != 1 {
		t.Errorf("the ack after a turn read the store %d times, want 1", n)
	}
}
