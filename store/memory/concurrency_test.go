package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// Every kind of call at once, from many goroutines: under -race this
// fails if any path reads or writes the store's state outside its lock,
// and afterwards the list order and the id indexes still agree.
func TestMixedCallsAtOnce(t *testing.T) {
	ctx := context.Background()
	s := New()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const workers, rounds = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := fmt.Sprintf("s%d-%d", w, i)
				sess := &berth.Session{ID: id, Agent: "demo", State: berth.StateStarting,
					CreatedAt: base.Add(time.Duration(i*workers+w) * time.Second), Labels: map[string]string{"w": fmt.Sprint(w)}}
				steps := []func() error{
					func() error { return s.CreateSession(ctx, sess) },
					func() error {
						return s.AppendEvents(ctx, []berth.Event{{SessionID: id, Seq: 1, Type: berth.EventTurnEnded, TurnID: "t"}})
					},
					func() error {
						_, err := s.EnqueuePrompt(ctx, &berth.QueueEntry{ID: "q" + id, SessionID: id, Kind: berth.EntryQueue}, 10)
						return err
					},
					func() error {
						_, err := s.AcquireLease(ctx, id, "me", time.Now(), time.Minute)
						return err
					},
					func() error {
						sess.State = berth.StateActive
						return s.UpdateSession(ctx, sess, berth.StateStarting)
					},
					func() error {
						_, err := s.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"w": fmt.Sprint(w)}})
						return err
					},
					func() error {
						_, err := s.ListEvents(ctx, id, berth.EventFilter{TurnID: "t"})
						return err
					},
				}
				if i%2 == 1 {
					steps = append(steps, func() error { return s.DeleteSession(ctx, id) })
				}
				for _, step := range steps {
					if err := step(); err != nil {
						errs <- fmt.Errorf("%s: %w", id, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	page, err := s.ListSessions(ctx, berth.SessionFilter{Limit: 1000})
	if err != nil || len(page.Sessions) != workers*rounds/2 || len(s.sessions) != workers*rounds/2 {
		t.Fatalf("%d sessions listed, %d stored (%v), want %d", len(page.Sessions), len(s.sessions), err, workers*rounds/2)
	}
	for i := 1; i < len(page.Sessions); i++ {
		if !page.Sessions[i].CreatedAt.Before(page.Sessions[i-1].CreatedAt) {
			t.Fatalf("list out of order at %d", i)
		}
	}
	if len(s.entryIDs) != workers*rounds/2 {
		t.Fatalf("%d entry ids kept, want %d: a delete left some", len(s.entryIDs), workers*rounds/2)
	}
}
