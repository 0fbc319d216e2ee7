package live

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// withCheckpointsAndHush gives the harness's sessions a checkpoint store
// (closed after them) and h.
func withCheckpointsAndHush(t *testing.T, h *Hush) func(*Host) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	return func(host *Host) {
		st := checkpoint.New(dir, checkpoint.Options{})
		t.Cleanup(st.Close)
		host.Checkpoints, host.Hush = st, h
	}
}

// A turn's checkpoint is committed only once no turn of the daemon waits
// for its agent's first words: held while another session's agent has
// not spoken (here, the test's hold), committed at once when it has.
func TestCheckpointCommitWaitsForTheDaemonsQuiet(t *testing.T) {
	h := NewHush(time.Minute)
	hs := newHarness(t, withCheckpointsAndHush(t, h))
	ls := hs.start()
	other := h.hold()
	hs.prompt(ls, "echo hello")
	if n := h.Waiting(); n != 1 {
		t.Fatalf("after the turn %d turns wait, want only the other one", n)
	}
	// A list waits for a checkpoint being committed.
	listed := make(chan []*checkpoint.Checkpoint, 1)
	go func() {
		list, err := hs.host.Checkpoints.List(ls.ID())
		if err != nil {
			t.Error(err)
		}
		listed <- list
	}()
	select {
	case list := <-listed:
		t.Fatalf("the checkpoint was committed while another turn waited for its agent: %d listed", len(list))
	case <-time.After(500 * time.Millisecond):
	}
	other()
	select {
	case list := <-listed:
		if len(list) != 1 {
			t.Fatalf("%d checkpoints listed, want the turn's", len(list))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the checkpoint was not committed once the daemon fell quiet")
	}
}

// A turn counts in the Hush from its start until its agent's first
// update, not until its end; a turn whose agent never says anything stops
// counting at its end.
func TestATurnHoldsTheHushUntilItsAgentSpeaks(t *testing.T) {
	h := NewHush(time.Minute)
	hs := newHarness(t, withCheckpointsAndHush(t, h))
	ls := hs.start()
	ctx := context.Background()
	in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: "sleep 3000"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ls.Prompt(ctx, berth.ModeQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the turn to count in the Hush", func() bool { return h.Waiting() == 1 })
	// The agent's first tick comes 100 ms into the turn, which lasts 3 s.
	waitFor(t, "the turn to stop counting at its agent's first words", func() bool { return h.Waiting() == 0 })
	if v := ls.View(); v.Badge != berth.BadgeRunning {
		t.Fatalf("the turn ended before its agent's first words were seen (badge %s)", v.Badge)
	}
	if _, _, err := ls.WaitTurn(ctx, r.TurnID); err != nil {
		t.Fatal(err)
	}
	// "sleep 0" says nothing at all.
	before := len(ofType(hs.events(ls.ID()), berth.EventAgentMessage))
	hs.prompt(ls, "sleep 0")
	if after := len(ofType(hs.events(ls.ID()), berth.EventAgentMessage)); after != before {
		t.Fatalf("the silent turn said %d things", after-before)
	}
	if n := h.Waiting(); n != 0 {
		t.Fatalf("a silent turn that ended still counts: %d waiting", n)
	}
}

// A session's next turn does not wait for the daemon's quiet: the last
// turn's commit, held back by it, goes at once, and so does the turn.
func TestTheNextTurnUrgesTheLastCommit(t *testing.T) {
	h := NewHush(time.Minute)
	hs := newHarness(t, withCheckpointsAndHush(t, h))
	ls := hs.start()
	defer h.hold()()
	hs.prompt(ls, "echo one")
	began := time.Now()
	hs.prompt(ls, "echo two")
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("the second turn took %s: it waited for the first one's commit", took)
	}
	evs := hs.events(ls.ID())
	if n := len(ofType(evs, berth.EventCheckpointCreated)); n != 2 {
		t.Fatalf("%d checkpoint_created, want 2", n)
	}
}

// A turn's prune asks every live session for the checkpoints their turns
// pin only when the tree is past its bytes: with room left, never.
func TestThePruneAsksForPinsOnlyWhenThereIsOne(t *testing.T) {
	for _, c := range []struct {
		max  int64
		asks bool
	}{{1 << 30, false}, {1, true}} {
		var asked atomic.Int32
		dir := filepath.Join(t.TempDir(), "checkpoints")
		hs := newHarness(t, func(h *Host) {
			st := checkpoint.New(dir, checkpoint.Options{MaxTreeBytes: c.max})
			t.Cleanup(st.Close)
			// Counted at the start, as a daemon's boot does.
			if _, err := st.Sweep(); err != nil {
				t.Fatal(err)
			}
			h.Checkpoints = st
			h.TurnCheckpoints = func(string) map[string]bool { asked.Add(1); return nil }
		})
		ls := hs.start()
		hs.prompt(ls, "echo one")
		hs.prompt(ls, "echo two")
		// The second turn's capture waits for the first one's commit and
		// prune; the list waits for the second's.
		hs.prompt(ls, "echo three")
		if _, err := hs.host.Checkpoints.List(ls.ID()); err != nil {
			t.Fatal(err)
		}
		if got := asked.Load() > 0; got != c.asks {
			t.Errorf("tree cap %d bytes: the pins were asked %d times", c.max, asked.Load())
		}
	}
}
