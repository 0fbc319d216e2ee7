package berth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestStateMachineAllowsOnlyTheContractsMoves(t *testing.T) {
	all := []State{StateStarting, StateActive, StateStopping, StateStopped}
	allowed := map[[2]State]bool{
		{StateStarting, StateActive}:   true,
		{StateStarting, StateStopping}: true,
		{StateStarting, StateStopped}:  true,
		{StateActive, StateStopping}:   true,
		{StateActive, StateStopped}:    true,
		{StateStopping, StateStopped}:  true,
		{StateStopped, StateStarting}:  true, // resume
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestBadges(t *testing.T) {
	cases := []struct {
		s          Session
		busy, hung bool
		want       Badge
	}{
		{Session{State: StateActive}, false, false, BadgeIdle},
		{Session{State: StateActive}, true, false, BadgeRunning},
		{Session{State: StateActive}, true, true, BadgeHung},
		{Session{State: StateActive, PendingPermissions: 1}, true, false, BadgeWaiting},
		{Session{State: StateActive, NeedsAuth: true}, false, false, BadgeNeedsAuth},
		{Session{State: StateStarting}, false, false, BadgeStarting},
		{Session{State: StateStopped, StopReason: StopUserRequested}, false, false, BadgeStopped},
		{Session{State: StateStopped, StopReason: StopAgentExited}, false, false, BadgeStopped},
		{Session{State: StateStopped, StopReason: StopAgentCrashed}, false, false, BadgeFailed},
		{Session{State: StateStopped, StopReason: StopStartupFailed}, false, false, BadgeFailed},
		{Session{State: StateStopped, StopReason: StopDaemonCrashed}, false, false, BadgeFailed},
	}
	for _, c := range cases {
		if got := c.s.ComputeBadge(c.busy, c.hung); got != c.want {
			t.Errorf("%+v busy=%v hung=%v: badge %s, want %s", c.s, c.busy, c.hung, got, c.want)
		}
	}
}

// A session's tally gives its badge, whatever mix of the fields the
// badge reads it has, and holds none its state's badge does not read (a
// stopped session's only its stop reason and failure): the census counts
// stored sessions by their tallies.
func TestTallyKeepsTheBadge(t *testing.T) {
	spent := Usage{ModelCalls: 2, InputTokens: 60, CostUSD: 1.5}
	tree := spent
	tree.Tree = &Usage{ModelCalls: 3, InputTokens: 100, CostUSD: 5}
	budgets := []Session{
		{},
		{Usage: spent, MaxCostUSD: new(2.0)},
		{Usage: spent, MaxCostUSD: new(1.5)},
		{Usage: spent, MaxTokens: new(int64(60))},
		{Usage: tree, MaxCostUSD: new(4.0)},
	}
	badges := map[Badge]bool{}
	n := 0
	for _, state := range []State{StateStarting, StateActive, StateStopping, StateStopped, "unknown"} {
		for _, reason := range []StopReason{"", StopUserRequested, StopAgentCrashed, StopDaemonCrashed} {
			for _, failure := range []*Failure{nil, {Kind: FailProcessExit}} {
				for _, pending := range [][2]int{{0, 0}, {2, 0}, {0, 1}} {
					for _, auth := range []*SessionAuth{nil, {}, {Missing: "anthropic"}} {
						for _, needsAuth := range []bool{false, true} {
							for _, b := range budgets {
								s := b
								s.State, s.StopReason, s.Failure, s.Auth, s.NeedsAuth = state, reason, failure, auth, needsAuth
								s.PendingPermissions, s.PendingElicitations = pending[0], pending[1]
								want := s.ComputeBadge(false, false)
								if got := s.Tally().Badge(); got != want {
									t.Errorf("%+v: the tally's badge %s, the session's %s", s, got, want)
								}
								// What its state's badge does not read, its tally does not hold.
								bare := Session{State: state, StopReason: reason, Failure: failure}
								if state != StateStopped {
									bare = s
									bare.StopReason, bare.Failure = "", nil
								}
								if s.Tally() != bare.Tally() {
									t.Errorf("%+v: tally %+v, of the fields its badge reads %+v", s, s.Tally(), bare.Tally())
								}
								badges[want] = true
								n++
							}
						}
					}
				}
			}
		}
	}
	// Every badge a session shows without a live turn was among them.
	if len(badges) != 7 {
		t.Fatalf("%d sessions showed %d badges: %v", n, len(badges), badges)
	}
}

func TestPromptValidation(t *testing.T) {
	for _, c := range []struct {
		req  PromptRequest
		code string
	}{
		{PromptRequest{Text: "hi"}, ""},
		{PromptRequest{Text: "hi", Mode: ModeSteer}, ""},
		{PromptRequest{Text: ""}, EInvalid},
		{PromptRequest{Text: " \n\t "}, EInvalid},
		{PromptRequest{Text: "hi", Mode: "shout"}, EInvalid},
		{PromptRequest{Text: strings.Repeat("x", 11)}, ETooLarge},
	} {
		if got := ErrorCode(c.req.Validate(10)); got != c.code {
			t.Errorf("%+v: code %q, want %q", c.req, got, c.code)
		}
	}
}

func TestErrorCodesSurviveWrapping(t *testing.T) {
	err := fmt.Errorf("store: %w", Errorf(ENotFound, "session %s not found", "ses_x"))
	if ErrorCode(err) != ENotFound || ErrorMessage(err) != "session ses_x not found" || !IsCode(err, ENotFound) {
		t.Fatalf("code %q message %q", ErrorCode(err), ErrorMessage(err))
	}
	plain := errors.New("disk on fire at /var/lib/x")
	if ErrorCode(plain) != EInternal || ErrorMessage(plain) != "internal error" {
		t.Fatalf("an uncoded error leaks: %q %q", ErrorCode(plain), ErrorMessage(plain))
	}
	wrapped := WrapError(EUnavailable, plain, "store unreachable")
	if !errors.Is(wrapped, plain) || ErrorMessage(wrapped) != "store unreachable" {
		t.Fatalf("wrapped = %v", wrapped)
	}
	if ErrorCode(nil) != "" || ErrorMessage(nil) != "" {
		t.Fatal("nil error has a code")
	}
}
