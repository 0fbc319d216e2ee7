package live

import (
	"time"

	"github.com/berth-sh/berth/internal/inflight"
)

// Hush holds a daemon's background checkpoint work (a turn's commit, the
// next turn's capture taken ahead) back while any of its sessions' turns
// waits for the agent's first words: those words are what the user
// waits for. Fifty prompts sent at once each committing its checkpoint
// after its own agent spoke slowed the first words of the others by a
// third on two cores (BENCHMARKS.md); held back, the commits run once the
// round is answered. Quiet must last HushSettle with no turn begun: a
// burst's prompts become turns over some milliseconds (the count falls to
// nothing between the first answered and the last arrived), and words
// the daemon has heard reach the clients a little later (the log's
// commit, the stream). A wait is bounded, so a daemon that never falls
// quiet still commits. The zero value is not usable: NewHush.
type Hush struct {
	// bound is the longest a piece of work waits for quiet.
	bound time.Duration
	// waiting counts the turns whose agent has not spoken yet.
	waiting inflight.Count
}

// HushBound is how long background work waits for quiet at most, unless
// NewHush is told otherwise.
const HushBound = time.Second

// HushSettle is how long quiet lasts, no turn begun, before background
// work goes: a 50-prompt burst on two cores turns its prompts into turns
// within a few milliseconds of each other, and its first words reach the
// clients some 10 ms after the daemon hears them (BENCHMARKS.md, issue 26
// seventh round).
const HushSettle = 30 * time.Millisecond

// NewHush returns a Hush with no turn waiting whose waits last bound at
// most (HushBound when 0).
func NewHush(bound time.Duration) *Hush {
	if bound <= 0 {
		bound = HushBound
	}
	return &Hush{bound: bound}
}

// hold counts one turn waiting for its agent's first words until release
// is called (once or more: only the first counts). A nil Hush holds
// nothing.
func (h *Hush) hold() (release func()) {
	if h == nil {
		return func() {}
	}
	return h.waiting.Start()
}

// Quiet returns a channel closed once no turn waits for its agent's first
// words (closed already when none does). A nil Hush is always quiet.
func (h *Hush) Quiet() <-chan struct{} {
	if h == nil {
		q := make(chan struct{})
		close(q)
		return q
	}
	return h.waiting.Idle()
}

// Waiting reports how many turns wait for their agent's first words.
func (h *Hush) Waiting() int {
	if h == nil {
		return 0
	}
	return h.waiting.InFlight()
}

// wait returns once h has been quiet for HushSettle with no turn begun,
// its bound passed or done is closed; it reports whether h fell quiet. A
// nil Hush is quiet at once.
func (h *Hush) wait(done <-chan struct{}) bool {
	if h == nil {
		return true
	}
	bound := time.NewTimer(h.bound)
	defer bound.Stop()
	settle := time.NewTimer(HushSettle)
	defer settle.Stop()
	for {
		select {
		case <-h.Quiet():
		case <-bound.C:
			return false
		case <-done:
			return false
		}
		begun := h.waiting.Started()
		settle.Reset(HushSettle)
		select {
		case <-settle.C:
		case <-bound.C:
			return false
		case <-done:
			return false
		}
		if h.waiting.IdleSince(begun) {
			return true
		}
	}
}
