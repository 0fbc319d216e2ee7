package transcript

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A preamble keeps the newest turns within maxPreamble, and each turn's
// text within its own bound: a session of flooding turns does not carry
// them all into the new conversation.
func TestPreambleIsBounded(t *testing.T) {
	var p Preamble
	big := strings.Repeat("x", 4<<20)
	for i := range 20 {
		turn, err := RenderTurn(context.Background(), &berth.TranscriptTurn{Prompt: fmt.Sprintf("turn %d", i), Text: big}, MaxPreambleTurn)
		if err != nil {
			t.Fatal(err)
		}
		p.Add(turn)
	}
	out := p.String("head\n")
	if len(out) > maxPreamble+1024 {
		t.Fatalf("preamble of %d bytes, bound %d", len(out), maxPreamble)
	}
	if !strings.Contains(out, "User: turn 19\n") || strings.Contains(out, "User: turn 0\n") {
		t.Fatal("the preamble does not keep the newest turns")
	}
	if (&Preamble{}).String("head\n") != "" {
		t.Fatal("a preamble of no turn is not empty")
	}
}
