package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/berth-sh/berth"
)

// listHook is a store whose ListEvents calls are counted, and run after.
type listHook struct {
	berth.Store
	calls atomic.Int64
	after func()
}

func (s *listHook) ListEvents(ctx context.Context, id string, f berth.EventFilter) ([]berth.Event, error) {
	evs, err := s.Store.ListEvents(ctx, id, f)
	s.calls.Add(1)
	if s.after != nil {
		s.after()
	}
	return evs, err
}

// A client that goes away while its transcript is rebuilt (GET
// …/transcript, or ?wait=true on a turn rebuilt from the log) stops the
// work: nothing more is read from the store.
func TestTranscriptStopsWhenTheClientLeaves(t *testing.T) {
	var hook *listHook
	e := newEnv(t, func(o *Options) {
		hook = &listHook{Store: o.Store}
		o.Store = hook
	})
	s := e.create(berth.CreateRequest{})
	// Over 1 MiB of text: the turn's result is not kept in memory, so a
	// late waiter rebuilds it from the log; and several pages of events.
	res := e.prompt(s.ID, "flood 600 2048")
	if res.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn: %+v", res)
	}
	if err := e.log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The whole turn comes back when the client stays.
	got, err := e.m.WaitTurn(context.Background(), s.ID, res.TurnID)
	if err != nil || len(fullText(t, got)) != 600*2048 || got.StopReason != berth.TurnEndTurn {
		t.Fatalf("rebuilt turn: %+v, %v", got, err)
	}

	rebuilds := map[string]func(context.Context) error{
		"transcript": func(ctx context.Context) error { _, err := e.m.Transcript(ctx, s.ID); return err },
		"wait":       func(ctx context.Context) error { _, err := e.m.WaitTurn(ctx, s.ID, res.TurnID); return err },
	}
	for name, rebuild := range rebuilds {
		ctx, cancel := context.WithCancel(context.Background())
		hook.calls.Store(0)
		// The client leaves once the first page is read.
		hook.after = cancel
		err := rebuild(ctx)
		hook.after = nil
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: err = %v, want context.Canceled", name, err)
		}
		if n := hook.calls.Load(); n != 1 {
			t.Fatalf("%s: %d pages read after the client left, want none", name, n-1)
		}
	}
}
