package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// withMaxTurnOutput caps the agent's output recorded per turn at n bytes.
func withMaxTurnOutput(n int64) func(*Options) {
	return func(o *Options) { o.Limits.MaxTurnOutput = n }
}

// outputOf sums the data of a turn's output events.
func outputOf(evs []berth.Event, turnID string) (n int) {
	for _, ev := range evs {
		switch ev.Type {
		case berth.EventAgentMessage, berth.EventAgentThought, berth.EventToolCall, berth.EventToolCallUpdate,
			berth.EventPlan, berth.EventUsage, berth.EventACPUnknown, berth.EventAgentStderr:
			if ev.TurnID == turnID {
				n += len(ev.Data)
			}
		}
	}
	return n
}

// truncationWarning is the output_truncated warning's data.
type truncationWarning struct {
	Reason         string `json:"reason"`
	MaxTurnOutput  int64  `json:"max_turn_output"`
	DroppedBytes   int64  `json:"dropped_bytes"`
	DroppedUpdates int64  `json:"dropped_updates"`
}

// fullText is a turn's text, read from the log when it is long.
func fullText(t *testing.T, res *berth.TurnResult) string {
	t.Helper()
	text, err := res.FullText(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// checkTruncated checks a flood turn past the cap: its output in the log
// stays under the cap, one warning right before turn_ended says how much
// was dropped, the turn ended well, and the next turn records again.
func checkTruncated(t *testing.T, e *env, id string, res *berth.TurnResult, max int64, flooded int64) {
	t.Helper()
	if res.StopReason != berth.TurnEndTurn {
		t.Fatalf("the flood turn: %+v", res)
	}
	evs := e.events(id)
	if got := outputOf(evs, res.TurnID); int64(got) > max {
		t.Fatalf("the log has %d bytes of the turn's output, over the cap of %d", got, max)
	}
	if n := len(fullText(t, res)); int64(n) > max {
		t.Fatalf("the turn's text is %d bytes, over the cap", n)
	}
	warns := warningsAbout(evs, live.ReasonOutputTruncated)
	if len(warns) != 1 || warns[0].TurnID != res.TurnID {
		t.Fatalf("%d output_truncated warnings (want 1 in the turn): %v", len(warns), types(evs))
	}
	var w truncationWarning
	if err := json.Unmarshal(warns[0].Data, &w); err != nil {
		t.Fatal(err)
	}
	// What was logged and what was dropped make the flood, give or take the
	// framing of each chunk.
	if w.MaxTurnOutput != max || w.DroppedBytes < flooded-2*max || w.DroppedBytes > 2*flooded || w.DroppedUpdates == 0 {
		t.Fatalf("warning %+v for a flood of %d bytes over a cap of %d", w, flooded, max)
	}
	var i int
	for i = range evs {
		if evs[i].Seq == warns[0].Seq {
			break
		}
	}
	if i+1 >= len(evs) || evs[i+1].Type != berth.EventTurnEnded {
		t.Fatalf("the warning is not right before turn_ended: %v", types(evs[i:]))
	}
	next := e.prompt(id, "echo recorded again")
	if next.StopReason != berth.TurnEndTurn || next.Text != "recorded again" {
		t.Fatalf("the turn after the flood: %+v", next)
	}
}

// A turn's output past limits.max_turn_output is dropped from the log, the
// turn goes on to its end, and one runtime_warning says how much was
// dropped; the daemon itself drops it when the agent is its own child.
func TestTurnOutputPastTheCapIsDropped(t *testing.T) {
	const max = 1 << 20
	e := newEnv(t, withMaxTurnOutput(max))
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "flood 100 60000")
	checkTruncated(t, e, s.ID, res, max, 100*60000)
}

// In a shim, the flood past the cap never reaches the spool: the shim
// reports what it dropped and the log says it as the daemon would have.
func TestTurnOutputPastTheCapIsDroppedBeforeTheSpool(t *testing.T) {
	const max = 1 << 20
	e := newShimEnv(t)
	e.close()
	e.open(withShims(e.home), withMaxTurnOutput(max))
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "flood 100 60000")
	// The spool keeps its size as it is punched: it is all that was spooled.
	spools, _ := filepath.Glob(filepath.Join(e.home, "run", s.ID+".*.spool"))
	if len(spools) != 1 {
		t.Fatalf("spools of the session: %v", spools)
	}
	if fi, err := os.Stat(spools[0]); err != nil || fi.Size() > 2*max {
		t.Fatalf("the spool took %v bytes (%v) of a 6 MB flood: more than the cap's worth", fi.Size(), err)
	}
	checkTruncated(t, e, s.ID, res, max, 100*60000)
}

// A chunk of text longer than MaxEventText is logged in pieces, in a row,
// that make the whole text; a reader gets it back whole.
func TestLongChunkIsLoggedInPieces(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "flood 1 3500000")
	var pieces []berth.Event
	for _, ev := range e.events(s.ID) {
		if ev.Type == berth.EventAgentMessage && ev.TurnID == res.TurnID {
			pieces = append(pieces, ev)
		}
	}
	if len(pieces) != 4 {
		t.Fatalf("a chunk of 3.5 MB is %d events, want 4 of at most %d bytes", len(pieces), live.MaxEventText)
	}
	var text strings.Builder
	for _, p := range pieces {
		var d live.TextData
		if err := json.Unmarshal(p.Data, &d); err != nil || len(d.Text) > live.MaxEventText {
			t.Fatalf("piece %d: %d bytes (%v)", p.Seq, len(d.Text), err)
		}
		text.WriteString(d.Text)
	}
	if text.Len() != 3500000 {
		t.Fatalf("the pieces hold %d bytes, want 3500000", text.Len())
	}
	ctx := context.Background()
	turns, err := e.m.Transcript(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := turns[len(turns)-1].FullText(ctx); err != nil || got != text.String() {
		t.Fatalf("the transcript's text is %d bytes, want the pieces' %d", len(got), text.Len())
	}
	if got := fullText(t, res); got != text.String() {
		t.Fatalf("the turn's answer is %d bytes, want %d", len(got), text.Len())
	}
}

// A request of the agent past the turn's cap is refused, not served: no
// permission is asked, nothing is logged for it, and the warning counts
// it; the daemon refuses it itself, or the agent's shim does.
func TestRequestPastTheCapIsRefused(t *testing.T) {
	const max = 1 << 20
	for _, shims := range []bool{false, true} {
		t.Run(map[bool]string{false: "daemon", true: "shim"}[shims], func(t *testing.T) {
			e := newEnv(t)
			e.close()
			if shims {
				e.open(withShims(e.home), withMaxTurnOutput(max))
			} else {
				e.open(withMaxTurnOutput(max))
			}
			s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
			res := e.prompt(s.ID, "flood 20 60000\nask may I write?")
			if res.StopReason != berth.TurnEndTurn {
				t.Fatalf("turn: %+v", res)
			}
			evs := e.events(s.ID)
			if n := len(ofType(evs, berth.EventPermissionRequested)); n != 0 {
				t.Fatalf("%d permissions asked past the cap", n)
			}
			warns := warningsAbout(evs, live.ReasonOutputTruncated)
			if len(warns) != 1 || !strings.Contains(string(warns[0].Data), `"refused_requests":1`) {
				t.Fatalf("warnings: %v", warns)
			}
		})
	}
}
