package live

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// withMaxTurnOutput caps the agent's output recorded per turn at n bytes.
func withMaxTurnOutput(n int64) func(*Host) {
	return func(h *Host) { h.Limits.MaxTurnOutput = n }
}

// A steer staged in a turn past its cap is delivered at once: the tool-call
// boundary it waits for is never seen any more.
func TestSteerDeliveredPastTheCap(t *testing.T) {
	hs := newHarness(t, withMaxTurnOutput(1<<20))
	ls := hs.start()
	ctx := context.Background()
	in, _ := ls.ResolveInput(ctx, berth.PromptRequest{Text: "flood 20 60000\nsleep 20000"})
	r, err := ls.Prompt(ctx, berth.ModeQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the turn's output to be truncated", func() bool {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return ls.out.w.truncated
	})
	steer, _ := ls.ResolveInput(ctx, berth.PromptRequest{Text: "echo steered"})
	if _, err := ls.Prompt(ctx, berth.ModeSteer, steer); err != nil {
		t.Fatal(err)
	}
	if res, _, err := ls.WaitTurn(ctx, r.TurnID); err != nil || res == nil {
		t.Fatalf("turn: %+v %v", res, err)
	}
	if n := len(ofType(hs.events(ls.ID()), berth.EventPromptSteered)); n != 1 {
		t.Fatalf("prompt_steered %d times", n)
	}
}

// A report of the time between turns that comes once a turn has begun (the
// daemon was behind the agent) is warned of as such, and does not cut the
// turn's own output; a report not signed with the session's token is not
// taken.
func TestLateReportBetweenTurnsLeavesTheTurnAlone(t *testing.T) {
	hs := newHarness(t, withMaxTurnOutput(1<<20))
	ls := hs.start()
	ls.mu.Lock()
	ls.box.socket = "/run/x.sock"
	token := hs.host.ShimToken(ls.ID(), ls.box.socket)
	ls.out.w = outputWindow{turnID: "turn_x"}
	late, _ := json.Marshal(shim.Report{Token: token, DroppedBytes: 5000, DroppedLines: 3})
	forged, _ := json.Marshal(shim.Report{Token: "nope", DroppedBytes: 5000, DroppedLines: 3, Turn: true})
	takenLate, takenForged := ls.out.shimReportLocked(late), ls.out.shimReportLocked(forged)
	truncated := ls.out.w.truncated
	ls.out.w = outputWindow{}
	ls.mu.Unlock()
	if !takenLate || takenForged || truncated {
		t.Fatalf("late report taken %v, forged report taken %v, the turn truncated %v", takenLate, takenForged, truncated)
	}
	var warns []berth.Event
	for _, ev := range ofType(hs.events(ls.ID()), berth.EventRuntimeWarning) {
		if strings.Contains(string(ev.Data), ReasonOutputTruncated) {
			warns = append(warns, ev)
		}
	}
	if len(warns) != 1 || warns[0].TurnID != "" {
		t.Fatalf("warnings: %v", warns)
	}
}
