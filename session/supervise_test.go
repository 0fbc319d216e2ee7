package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// fastSupervisor makes the supervisor look often and stalls short.
func fastSupervisor(stall, stallTimeout time.Duration) func(*Options) {
	return func(o *Options) {
		o.Limits.SuperviseEvery = 20 * time.Millisecond
		o.Limits.StallAfter, o.Limits.StallTimeout = stall, stallTimeout
	}
}

func TestAHangingTurnShowsHung(t *testing.T) {
	// The stall is ten of the demo agent's 100 ms ticks, so a talking
	// turn is not taken for a hung one on a loaded machine.
	const stall = time.Second
	e := newEnv(t, fastSupervisor(stall, 0))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "echo start\nhang", "")
	waitFor(t, "the badge hung", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.Badge == berth.BadgeHung
	})
	warned := false
	for _, ev := range ofType(e.events(s.ID), berth.EventRuntimeWarning) {
		warned = warned || (ev.TurnID == r.TurnID && strings.Contains(string(ev.Data), "stalled"))
	}
	if !warned {
		t.Fatalf("no stall warning in the turn: %v", types(e.events(s.ID)))
	}
	// A turn that is busy but talking, three stalls long, is never taken
	// for hung: its whole log, once it ended, holds no stall warning.
	other := e.create(berth.CreateRequest{})
	or := e.promptOK(other.ID, fmt.Sprintf("sleep %d", 3*stall.Milliseconds()), "")
	if res, err := e.m.WaitTurn(ctx, other.ID, or.TurnID); err != nil || res.StopReason != berth.TurnEndTurn {
		t.Fatalf("the talking turn = %+v, %v", res, err)
	}
	if warns := ofType(e.events(other.ID), berth.EventRuntimeWarning); len(warns) > 0 {
		t.Fatalf("a talking turn was taken for hung: %s", warns[0].Data)
	}
}

func TestStallTimeoutStopsTheSession(t *testing.T) {
	e := newEnv(t, fastSupervisor(200*time.Millisecond, 600*time.Millisecond), func(o *Options) { o.Limits.CancelGrace = 200 * time.Millisecond })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.promptOK(s.ID, "hang", "")
	waitFor(t, "the session to stop", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	if got, _ := e.m.GetSession(ctx, s.ID); got.StopReason != berth.StopStallTimeout || !got.Resumable {
		t.Fatalf("stopped %s resumable %v", got.StopReason, got.Resumable)
	}
}

// An agent that does not end a cancelled turn within cancel_grace is hung,
// not crashed: berth stops it as stall_timeout, saying why.
func TestAnAgentIgnoringACancelStopsAsHung(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = 300 * time.Millisecond })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "hang", "")
	waitFor(t, "the turn to start", func() bool { return len(ofType(e.events(s.ID), berth.EventTurnStarted)) > 0 })
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(s.ID, r.TurnID); res.StopReason != berth.TurnCancelled {
		t.Fatalf("turn: %+v", res)
	}
	waitFor(t, "the session to stop", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.StopReason != berth.StopStallTimeout || got.Failure == nil || got.Failure.Kind != berth.FailTimeout ||
		!strings.Contains(got.Failure.Message, "cancel_grace") || !got.Resumable {
		t.Fatalf("stopped %s, failure %+v, resumable %v", got.StopReason, got.Failure, got.Resumable)
	}
}

func TestIdleSessionsAreReapedAndKeepTheirWork(t *testing.T) {
	e := newEnv(t, fastSupervisor(0, 0))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{IdleTimeoutSeconds: 1})
	e.prompt(s.ID, "write kept.txt still here")
	busy := e.create(berth.CreateRequest{IdleTimeoutSeconds: 1})
	e.promptOK(busy.ID, "sleep 3000", "")
	waitFor(t, "the idle session to be reaped", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.StopReason != berth.StopIdleTimeout || !got.Resumable {
		t.Fatalf("reaped: %s resumable %v", got.StopReason, got.Resumable)
	}
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "kept.txt")); err != nil || string(b) != "still here" {
		t.Fatalf("the workspace lost its file: %q %v", b, err)
	}
	// A session with a turn in flight is never reaped for idleness.
	if b, _ := e.m.GetSession(ctx, busy.ID); b.State != berth.StateActive {
		t.Fatalf("a busy session was reaped: %s", b.StopReason)
	}
	// A prompt resumes the reaped one.
	if res := e.prompt(s.ID, "read kept.txt"); res.Text != "still here" {
		t.Fatalf("after resume: %+v", res)
	}
}

// A session whose agent takes longer to start than its idle timeout is not
// reaped on arrival: its idle clock starts when it becomes active, on its
// create and on the resume a prompt makes.
func TestASlowStartIsNotReapedOnArrival(t *testing.T) {
	const startDelay = 1500 * time.Millisecond
	self, _ := os.Executable()
	e := newEnv(t, fastSupervisor(0, 0), func(o *Options) {
		c := catalog()
		c["slow"] = berth.AgentSpec{Name: "slow", Command: "/bin/sh", Args: []string{"-c", "sleep 1.5; exec \"$0\"", self},
			Env: map[string]string{agentEnvVar: "demo"}}
		o.Catalog = c
	})
	ctx := context.Background()
	t0 := time.Now()
	s := e.create(berth.CreateRequest{Agent: "slow", IdleTimeoutSeconds: 1})
	if got, _ := e.m.GetSession(ctx, s.ID); got.LastActivityAt.Before(t0.Add(startDelay)) {
		t.Fatalf("the idle clock started %v into a start of %v", got.LastActivityAt.Sub(t0), startDelay)
	}
	waitFor(t, "the idle session to be reaped", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	// The prompt resumes it, through the same slow start, and is answered.
	if res := e.prompt(s.ID, "echo resumed"); res.Text != "resumed" {
		t.Fatalf("after a slow resume: %+v", res)
	}
}

func TestTTLExpiry(t *testing.T) {
	e := newEnv(t, fastSupervisor(0, 0))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{TTLSeconds: 1})
	waitFor(t, "the TTL to stop the session", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.State == berth.StateStopped
	})
	if got, _ := e.m.GetSession(ctx, s.ID); got.StopReason != berth.StopTTLExpired {
		t.Fatalf("stopped %s", got.StopReason)
	}
}

func TestAQuietTurnRecoversWhenTheAgentSpeaks(t *testing.T) {
	e := newEnv(t, fastSupervisor(300*time.Millisecond, 0))
	s := e.create(berth.CreateRequest{})
	// The agent waits on a terminal for 1.5 s without a word, then speaks.
	res := e.prompt(s.ID, "run sleep 1.5\necho done")
	if res.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn: %+v", res)
	}
	var order []string
	for _, ev := range e.events(s.ID) {
		if ev.TurnID == res.TurnID && (ev.Type == berth.EventRuntimeWarning || ev.Type == berth.EventRuntimeRecovered) {
			order = append(order, ev.Type)
		}
	}
	if strings.Join(order, ",") != berth.EventRuntimeWarning+","+berth.EventRuntimeRecovered {
		t.Fatalf("stall events: %v", order)
	}
	if got, _ := e.m.GetSession(context.Background(), s.ID); got.Badge != berth.BadgeIdle {
		t.Fatalf("badge after the turn: %s", got.Badge)
	}
}

// An idle session is looked at by its deadline, at least every
// idleLookEvery ticks, not every tick; one with a turn in flight every
// tick; one whose view changed (a prompt) on the next tick, though it was
// not due. (A thousand idle sessions looked at each second were most of
// an idle daemon's CPU.)
func TestTheSupervisorLooksAtIdleSessionsWhenDue(t *testing.T) {
	// Its own ticks never come: the test runs once by hand.
	e := newEnv(t, func(o *Options) { o.Limits.SuperviseEvery = time.Hour })
	idle := e.create(berth.CreateRequest{IdleTimeoutSeconds: 5})
	noDeadline := e.create(berth.CreateRequest{})
	ends := e.create(berth.CreateRequest{})
	busy := e.create(berth.CreateRequest{})
	e.promptOK(busy.ID, "sleep 3000", "")
	v := &e.m.supervisor
	now := time.Now()
	v.once(now)
	dueOf := func(id string) time.Time { return v.due[e.m.set.liveOf(id)] }
	if d := dueOf(busy.ID); !d.Equal(now.Add(time.Hour)) {
		t.Errorf("the busy session's next look is %v after now, want the next tick", d.Sub(now))
	}
	// Its deadline counts from its last activity (its create's end: the
	// creates after it may take a second under load).
	if d, want := dueOf(idle.ID), e.m.set.liveOf(idle.ID).View().LastActivityAt.Add(5*time.Second); !d.Equal(want) || !d.After(now) {
		t.Errorf("the idle session's next look is %v after now, want its idle deadline (%v after now)", d.Sub(now), want.Sub(now))
	}
	if d := dueOf(noDeadline.ID); !d.Equal(now.Add(idleLookEvery * time.Hour)) {
		t.Errorf("the session without a deadline is next looked at %v after now, want %d ticks", d.Sub(now), idleLookEvery)
	}
	// Not due: skipped, its next look kept.
	later := now.Add(time.Second)
	v.once(later)
	if d := dueOf(noDeadline.ID); !d.Equal(now.Add(idleLookEvery * time.Hour)) {
		t.Errorf("a session not due was looked at: next look %v", d)
	}
	// A prompt wakes it: looked at on the next tick, then every tick.
	e.promptOK(noDeadline.ID, "sleep 3000", "")
	v.once(later.Add(time.Second))
	if d := dueOf(noDeadline.ID); !d.Equal(later.Add(time.Second + time.Hour)) {
		t.Errorf("a session prompted is next looked at %v after the tick, want the next tick", d.Sub(later.Add(time.Second)))
	}
	// Past its deadline it is looked at and reaped.
	v.once(now.Add(6 * time.Second))
	waitFor(t, "the idle session reaped at its deadline", func() bool {
		got, _ := e.m.GetSession(context.Background(), idle.ID)
		return got.State == berth.StateStopped && got.StopReason == berth.StopIdleTimeout
	})
	// A session that ends is forgotten by the next read of the set, its
	// queued looks with it (its idle look, minutes off): nothing holds it
	// in memory.
	ended := e.m.set.liveOf(ends.ID)
	if _, err := e.m.StopSession(context.Background(), ends.ID); err != nil {
		t.Fatal(err)
	}
	for range findEvery {
		v.once(now.Add(7 * time.Second))
	}
	if _, ok := v.due[ended]; ok {
		t.Error("the supervisor still schedules a session that ended")
	}
	for _, l := range v.next {
		if l.ls == ended {
			t.Fatal("the supervisor's queue still holds a session that ended")
		}
	}
}
