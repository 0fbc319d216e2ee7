package session

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
)

// withMaxLine caps one agent line at n bytes.
func withMaxLine(n int) func(*Options) {
	return func(o *Options) { o.Limits.MaxLineBytes = n }
}

// warningsAbout returns the runtime_warning events whose reason contains s.
func warningsAbout(evs []berth.Event, s string) []berth.Event {
	var out []berth.Event
	for _, ev := range ofType(evs, berth.EventRuntimeWarning) {
		if strings.Contains(string(ev.Data), s) {
			out = append(out, ev)
		}
	}
	return out
}

// A line over limits.max_line_bytes is skipped, and the session's log says
// so once, naming the line's size and the cap; the turn goes on.
func TestOversizedLineBecomesOneWarning(t *testing.T) {
	e := newEnv(t, withMaxLine(64<<10))
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "flood 1 200000\necho after")
	if res.StopReason != berth.TurnEndTurn || !strings.HasSuffix(res.Text, "after") {
		t.Fatalf("turn: %+v", res)
	}
	evs := e.events(s.ID)
	warns := warningsAbout(evs, "over the cap of 65536 bytes")
	if len(warns) != 1 {
		t.Fatalf("%d warnings about the long line, want 1: %v", len(warns), types(evs))
	}
	if w := string(warns[0].Data); !strings.Contains(w, `"max_bytes":65536`) || warns[0].TurnID != res.TurnID {
		t.Fatalf("warning: %s (turn %q)", w, warns[0].TurnID)
	}
	for _, ev := range ofType(evs, berth.EventAgentMessage) {
		if len(ev.Data) > 64<<10 {
			t.Fatalf("a line over the cap was logged (%d bytes)", len(ev.Data))
		}
	}
}

// A daemon that restarts while its agent runs on in a shim reads the
// agent's stdout again from what it committed: the warning about a long
// line is not repeated by that replay.
func TestOversizedLineWarningNotRepeatedAfterReattach(t *testing.T) {
	e := newShimEnv(t)
	e.close()
	e.open(withShims(e.home), withMaxLine(64<<10))
	s := e.create(berth.CreateRequest{})
	// The agent stays silent after the long line: nothing else moves the
	// committed stdout offset past it.
	r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "flood 1 200000\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warning", func() bool { return len(warningsAbout(e.events(s.ID), "over the cap")) == 1 })

	e.detachAndReopen(withShims(e.home), withMaxLine(64<<10))
	if _, err := e.m.Cancel(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnCancelled {
		t.Fatalf("turn: %+v", res)
	}
	if n := len(warningsAbout(e.events(s.ID), "over the cap")); n != 1 {
		t.Fatalf("%d warnings about the long line after the restart, want 1", n)
	}
}

// gatedStore holds back the commit of agent messages until open is closed.
type gatedStore struct {
	berth.Store
	open chan struct{}
}

func (s *gatedStore) AppendEvents(ctx context.Context, evs []berth.Event) error {
	for i := range evs {
		if evs[i].Type == berth.EventAgentMessage {
			<-s.open
			break
		}
	}
	return s.Store.AppendEvents(ctx, evs)
}

// An agent that floods faster than the log commits is held back once its
// session has its budget of bytes in flight: the session never holds
// more, and nothing is dropped.
func TestFloodingSessionHoldsAtMostItsBudget(t *testing.T) {
	const budget, chunk, chunks = 64 << 10, 4 << 10, 200
	gate := &gatedStore{open: make(chan struct{})}
	e := &env{t: t, home: t.TempDir(), logOpts: eventlog.Options{SessionBytes: budget},
		wrap: func(st berth.Store) berth.Store { gate.Store = st; return gate }}
	e.open()
	t.Cleanup(e.close)
	var opened sync.Once
	release := func() { opened.Do(func() { close(gate.open) }) }
	t.Cleanup(release)

	s := e.create(berth.CreateRequest{})
	r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: fmt.Sprintf("flood %d %d", chunks, chunk)})
	if err != nil {
		t.Fatal(err)
	}
	// The commits are held: the session fills its budget, and waits.
	waitFor(t, "the budget to fill", func() bool { now, _ := e.log.InFlight(s.ID); return now > budget-2*chunk })
	if now, _ := e.log.InFlight(s.ID); now > budget {
		t.Fatalf("%d bytes in flight, over the budget of %d", now, budget)
	}
	release()
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn: %+v", res)
	}
	if n := len(ofType(e.events(s.ID), berth.EventAgentMessage)); n != chunks {
		t.Fatalf("%d of %d chunks logged", n, chunks)
	}
	if _, peak := e.log.InFlight(s.ID); peak > budget || peak < budget-2*chunk {
		t.Fatalf("at most %d bytes were in flight; want the budget of %d, never more", peak, budget)
	}
}
