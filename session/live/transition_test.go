package live

import (
	"context"
	"testing"

	"github.com/berth-sh/berth"
)

// A move the state machine forbids is refused, and the store is left as
// it was.
func TestTransitionRefusesMovesTheStateMachineForbids(t *testing.T) {
	hs := newHarness(t)
	ls := hs.start()
	ctx := context.Background()
	for _, to := range []berth.State{berth.StateStarting, berth.StateActive} {
		if err := ls.life.transition(ctx, to, nil); !berth.IsCode(err, berth.EConflict) {
			t.Fatalf("active → %s = %v, want conflict", to, err)
		}
	}
	stored, _ := hs.store.GetSession(ctx, ls.ID())
	if stored.State != berth.StateActive {
		t.Fatalf("a refused move changed the store: %s", stored.State)
	}
}
