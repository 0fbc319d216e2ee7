package session

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// foldAlloc folds a turn of n chunks of size bytes and returns the bytes
// allocated per byte of text.
func foldAlloc(t *testing.T, n, size int) float64 {
	t.Helper()
	chunk := strings.Repeat("x", size)
	evs := []berth.Event{berth.NewEvent("ses_1", "turn_1", berth.EventTurnStarted, live.TurnStartedData{Text: "go"})}
	for range n {
		evs = append(evs, berth.NewEvent("ses_1", "turn_1", berth.EventAgentMessage, live.TextData{Text: chunk}))
	}
	evs = append(evs, berth.NewEvent("ses_1", "turn_1", berth.EventTurnEnded, live.TurnEndedData{StopReason: "end_turn"}))

	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	var b transcriptBuilder
	for i := range evs {
		b.add(&evs[i])
	}
	turns := b.finish()
	text := turns[0].Text
	goruntime.ReadMemStats(&after)
	if len(turns) != 1 || len(text) != n*size {
		t.Fatalf("turns: %d, text %d bytes", len(turns), len(text))
	}
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n*size)
}

// Folding a turn costs memory (and so copying) in proportion to its text,
// whatever the number of chunks: appending each chunk to a string copied
// the whole text so far every time (n/2 times the text for n chunks).
func TestTranscriptCostIsLinearInTheText(t *testing.T) {
	// Texts a turn keeps in memory (up to maxTurnText; a longer one is read
	// again from the log as it is written).
	for _, c := range []struct{ n, size int }{{64, 8 << 10}, {512, 1 << 10}} {
		// The logged bytes are copied once (a page's buffer is not kept)
		// and decoded once, into one string: about 2×.
		if r := foldAlloc(t, c.n, c.size); r > 2.5 {
			t.Fatalf("folding %d chunks allocated %.1f× their text: not linear", c.n, r)
		}
	}
}

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

// A preamble keeps the newest turns within maxPreamble, and each turn's
// text within its own bound: a session of flooding turns does not carry
// them all into the new conversation.
func TestPreambleIsBounded(t *testing.T) {
	var p preamble
	big := strings.Repeat("x", 4<<20)
	for i := range 20 {
		turn, err := renderTurn(context.Background(), &berth.TranscriptTurn{Prompt: fmt.Sprintf("turn %d", i), Text: big}, maxPreambleTurn)
		if err != nil {
			t.Fatal(err)
		}
		p.add(turn)
	}
	out := p.String("head\n")
	if len(out) > maxPreamble+1024 {
		t.Fatalf("preamble of %d bytes, bound %d", len(out), maxPreamble)
	}
	if !strings.Contains(out, "User: turn 19\n") || strings.Contains(out, "User: turn 0\n") {
		t.Fatal("the preamble does not keep the newest turns")
	}
	if (&preamble{}).String("head\n") != "" {
		t.Fatal("a preamble of no turn is not empty")
	}
}
