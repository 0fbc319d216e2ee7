package transcript

import (
	goruntime "runtime"
	"strings"
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
	var b Builder
	for i := range evs {
		if err := b.Add(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	turns := b.Finish()
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
	// Texts a turn keeps in memory (up to live.MaxTurnText; a longer one
	// is read again from the log as it is written).
	for _, c := range []struct{ n, size int }{{64, 8 << 10}, {512, 1 << 10}} {
		// The logged bytes are copied once (a page's buffer is not kept)
		// and decoded once, into one string: about 2×.
		if r := foldAlloc(t, c.n, c.size); r > 2.5 {
			t.Fatalf("folding %d chunks allocated %.1f× their text: not linear", c.n, r)
		}
	}
}
