package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// testCountStopped: a store that counts its stopped sessions counts them
// as reading them whole would, leaving out the sessions not stopped and
// those excluded by id.
func testCountStopped(t *testing.T, open Opener) {
	s := fresh(t, open)
	counter, ok := s.(berth.SessionCounter)
	if !ok {
		t.Skip("the store does not count sessions")
	}
	base := time.Now().UTC()
	reasons := []berth.StopReason{berth.StopUserRequested, berth.StopAgentCrashed, berth.StopIdleTimeout}
	var excluded []string
	for i := range 30 {
		sess := newSession(fmt.Sprintf("ses_%02d", i), base.Add(time.Duration(i)*time.Millisecond))
		sess.Agent = []string{"claude", "codex"}[i%2]
		if i%5 != 4 {
			sess.State, sess.StopReason = berth.StateStopped, reasons[i%3]
			if i%7 == 0 {
				sess.Failure = &berth.Failure{Kind: berth.FailProcessExit, Message: "exit 1"}
			}
		}
		if err := s.CreateSession(ctx(t), sess); err != nil {
			t.Fatal(err)
		}
		if i%6 == 1 {
			excluded = append(excluded, sess.ID)
		}
	}
	// What reading every session whole says.
	want := map[berth.StoppedCount]int{}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{State: berth.StateStopped, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range page.Sessions {
		if !slices.Contains(excluded, sess.ID) {
			want[berth.StoppedCount{Agent: sess.Agent, StopReason: sess.StopReason, HasFailure: sess.Failure != nil}]++
		}
	}
	for _, exclude := range [][]string{excluded, nil} {
		counts, err := counter.CountStopped(ctx(t), exclude)
		if err != nil {
			t.Fatal(err)
		}
		got := map[berth.StoppedCount]int{}
		for _, c := range counts {
			n := c.Sessions
			c.Sessions = 0
			got[c] += n
		}
		if exclude == nil {
			// Nothing left out: the excluded stopped ones count too.
			for _, sess := range page.Sessions {
				if slices.Contains(excluded, sess.ID) {
					want[berth.StoppedCount{Agent: sess.Agent, StopReason: sess.StopReason, HasFailure: sess.Failure != nil}]++
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("CountStopped(%d excluded) = %v, want %v", len(exclude), got, want)
		}
	}
}
