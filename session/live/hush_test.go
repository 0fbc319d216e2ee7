package live

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// A Hush counts holds, each released once however often its release is
// called; it is quiet with none, and a wait ends at quiet, at its bound
// or when told.
func TestHushCountsHolds(t *testing.T) {
	h := NewHush(time.Minute)
	isQuiet := func() bool {
		select {
		case <-h.Quiet():
			return true
		default:
			return false
		}
	}
	if !isQuiet() || h.Waiting() != 0 {
		t.Fatal("a new Hush is not quiet")
	}
	r1, r2 := h.hold(), h.hold()
	r1()
	r1()
	if isQuiet() || h.Waiting() != 1 {
		t.Fatalf("one hold released twice: waiting %d, quiet %v", h.Waiting(), isQuiet())
	}
	quiet := h.Quiet()
	done := make(chan bool)
	go func() { done <- h.wait(nil) }()
	r2()
	if !<-done || !isQuiet() {
		t.Fatal("the last release did not make the Hush quiet")
	}
	select {
	case <-quiet:
	default:
		t.Fatal("the channel Quiet gave while held was not closed at quiet")
	}
	// Bounded: a hold never released holds a wait for the bound only.
	short := NewHush(50 * time.Millisecond)
	short.hold()
	began := time.Now()
	if short.wait(nil) || time.Since(began) < 50*time.Millisecond {
		t.Fatalf("a wait on a held Hush returned quiet, or before its bound (%s)", time.Since(began))
	}
	stop := make(chan struct{})
	close(stop)
	if h.hold(); h.wait(stop) {
		t.Fatal("a wait told to stop returned quiet")
	}
	var none *Hush
	if !none.wait(nil) || none.Waiting() != 0 {
		t.Fatal("a nil Hush is not quiet")
	}
	none.hold()()
}

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
