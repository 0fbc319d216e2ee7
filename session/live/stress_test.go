package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// stressOps is what the API does to a live session, one call each.
// weight is how often an op is picked, against the others.
var stressOps = []struct {
	name   string
	weight int
	do     func(ctx context.Context, hs *harness, ls *Session, r *rand.Rand) error
}{
	{"prompt", 6, func(ctx context.Context, _ *harness, ls *Session, r *rand.Rand) error {
		texts := []string{"echo hi", "sleep 150", "ask may I?", "ask again?", "elicit name?", "elicit age?", "flood 5 2000", "stderr oops\necho done"}
		in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: texts[r.IntN(len(texts))]})
		if err != nil {
			return err
		}
		res, err := ls.Prompt(ctx, berth.ModeQueue, in)
		if err == nil && res.TurnID != "" && r.IntN(2) == 0 {
			// Half the callers wait for their turn, as ?wait=true does.
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, _, _ = ls.WaitTurn(wctx, res.TurnID)
		}
		return err
	}},
	{"steer", 1, func(ctx context.Context, _ *harness, ls *Session, _ *rand.Rand) error {
		return stressPrompt(ctx, ls, berth.ModeSteer, "echo steered")
	}},
	{"interrupt", 1, func(ctx context.Context, _ *harness, ls *Session, _ *rand.Rand) error {
		return stressPrompt(ctx, ls, berth.ModeInterrupt, "echo interrupted")
	}},
	{"cancel turn", 1, func(_ context.Context, _ *harness, ls *Session, _ *rand.Rand) error {
		_, err := ls.CancelTurn()
		return err
	}},
	{"cancel entry", 1, func(ctx context.Context, hs *harness, ls *Session, r *rand.Rand) error {
		es, err := hs.store.ListQueue(ctx, ls.ID())
		if err = nothing(err, len(es)); err != nil {
			return err
		}
		_, err = ls.CancelEntry(ctx, es[r.IntN(len(es))].ID)
		return err
	}},
	{"decide", 3, func(ctx context.Context, hs *harness, ls *Session, r *rand.Rand) error {
		ps, err := pendingSoon(func() ([]*berth.Permission, error) {
			return hs.store.ListPermissions(ctx, ls.ID(), berth.PermissionPending)
		})
		if err != nil {
			return err
		}
		// A once option: one remembered for the tool kind would answer
		// every later question itself.
		p := ps[r.IntN(len(ps))]
		var once []string
		for _, o := range p.Options {
			if o.Kind == berth.DecisionAllowOnce || o.Kind == berth.DecisionRejectOnce {
				once = append(once, o.ID)
			}
		}
		_, err = ls.Decide(ctx, p.ID, berth.PermissionDecided, once[r.IntN(len(once))], berth.DecidedByUser)
		return err
	}},
	{"answer", 3, func(ctx context.Context, hs *harness, ls *Session, _ *rand.Rand) error {
		es, err := pendingSoon(func() ([]*berth.Elicitation, error) {
			return hs.store.ListElicitations(ctx, ls.ID(), berth.ElicitationPending)
		})
		if err != nil {
			return err
		}
		_, err = ls.ResolveElicitation(ctx, es[0].ID, berth.ElicitationAccept, map[string]any{"answer": "x"}, berth.DecidedByUser)
		return err
	}},
	{"patch", 1, func(ctx context.Context, _ *harness, ls *Session, r *rand.Rand) error {
		_, err := ls.Patch(ctx, berth.SessionPatch{Mode: []string{"plan", "default"}[r.IntN(2)]})
		return err
	}},
	{"exec", 1, func(ctx context.Context, _ *harness, ls *Session, _ *rand.Rand) error {
		_, err := ls.Exec(ctx, berth.ExecRequest{Command: []string{"true"}, TimeoutSeconds: 10})
		return err
	}},
	{"look", 2, func(ctx context.Context, _ *harness, ls *Session, _ *rand.Rand) error {
		_ = ls.View()
		_, _ = ls.Supervise(time.Now())
		_ = ls.PublishIfFree()
		if id := ls.View().CurrentTurnID; id != "" {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, _, _ = ls.WaitTurn(wctx, id)
		}
		return nil
	}},
}

// pickOp picks an op by weight.
func pickOp(r *rand.Rand) int {
	total := 0
	for _, op := range stressOps {
		total += op.weight
	}
	n := r.IntN(total)
	for i, op := range stressOps {
		if n -= op.weight; n < 0 {
			return i
		}
	}
	return 0
}

// errNothing is a call that found nothing to act on.
var errNothing = &berth.Error{Code: berth.ENotFound, Message: "nothing to act on"}

// nothing is err, or errNothing when n is 0.
func nothing(err error, n int) error {
	if err == nil && n == 0 {
		return errNothing
	}
	return err
}

// pendingSoon is what list finds pending, errNothing when nothing: a
// question may be on its way, so a decider waits a little for one.
func pendingSoon[T any](list func() ([]T, error)) ([]T, error) {
	var items []T
	var err error
	pollFor(200*time.Millisecond, func() bool {
		items, err = list()
		return err != nil || len(items) > 0
	})
	return items, nothing(err, len(items))
}

// eventually polls cond for up to 30 s.
func eventually(cond func() bool) bool { return pollFor(30*time.Second, cond) }

func pollFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// stressPrompt sends one prompt as the API does.
func stressPrompt(ctx context.Context, ls *Session, mode, text string) error {
	in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: text})
	if err != nil {
		return err
	}
	_, err = ls.Prompt(ctx, mode, in)
	return err
}

// Many goroutines do to live sessions, at once, what the API does:
// prompts of every mode, cancels of turns and entries, permission
// decisions and elicitation answers, patches, execs and looks; midway,
// while they go on, one session is stopped, one lost (another node took
// it) and one detached (with no shim to run on in, it stops). No lock
// waits on another for good (the whole ends before its deadline, else
// every goroutine is dumped), no call fails with an internal error (nor
// one without a code), and each session's log is whole: gap-free, each
// turn started and ended once, nothing after session_stopped.
func TestStressTheAPIConcurrently(t *testing.T) {
	hs := newHarness(t, func(h *Host) {
		// Room for queued prompts, questions that wait for an answer, and
		// turns the supervisor sees stall.
		h.Limits.MaxQueue, h.Limits.PermissionTimeout, h.Limits.StallAfter = 8, time.Minute, 100*time.Millisecond
	})
	ask := func(s *berth.Session) { s.PermissionMode = berth.PermAsk }
	sessions := []*Session{hs.start(ask), hs.start(ask), hs.start(ask)}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	done := make(chan struct{})
	var (
		mu   sync.Mutex
		bad  []string
		seen = map[string]int{}
	)
	// Each session ends its own way midway, while the load goes on.
	ends := []func(context.Context, *Session){
		func(ctx context.Context, ls *Session) { ls.Stop(ctx, berth.StopUserRequested, nil) },
		func(_ context.Context, ls *Session) { ls.Lose() },
		func(ctx context.Context, ls *Session) { ls.Detach(ctx) },
	}
	go func() {
		defer close(done)
		ctx := context.Background()
		var wg sync.WaitGroup
		for i, ls := range sessions {
			for g := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, uint64(i*100+g)))
					for n := range 60 {
						if g == 0 && n == 30 {
							// Once the session has run turns under the load.
							if !eventually(func() bool { return ls.View().Turns >= 10 }) {
								mu.Lock()
								bad = append(bad, fmt.Sprintf("session %d ran %d turns under the load", i, ls.View().Turns))
								mu.Unlock()
							}
							ends[i](ctx, ls)
						}
						op := stressOps[pickOp(r)]
						err := op.do(ctx, hs, ls, r)
						mu.Lock()
						switch {
						case err == nil:
							seen[op.name]++
						case err == errNothing:
							seen["nothing to "+op.name]++
						default:
							seen[op.name+" refused"]++
						}
						if err != nil && berth.ErrorCode(err) == berth.EInternal {
							bad = append(bad, fmt.Sprintf("%s: %v", op.name, err))
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		hs.abandon()
		t.Fatal("the sessions did not get through the load: deadlocked")
	}
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("calls that went through: %v", seen)
	for i, ls := range sessions {
		select {
		case <-ls.Done():
		case <-time.After(time.Minute):
			t.Fatalf("session %d did not end", i)
		}
		evs := hs.events(ls.ID())
		t.Logf("session %d: %d events, %d turns, %d permissions, %d elicitations", i, len(evs), len(ofType(evs, berth.EventTurnEnded)),
			len(ofType(evs, berth.EventPermissionRequested)), len(ofType(evs, berth.EventElicitationRequested)))
		if msg := wholeLog(evs, i != 1); msg != "" {
			t.Errorf("session %d: %s", i, msg)
		}
	}
}

// wholeLog says what is wrong with a session's log, or "": a gap in its
// seqs, a turn started twice or ended without starting, and when stopped
// says it ended (stopped), a turn still open or anything after
// session_stopped.
func wholeLog(evs []berth.Event, stopped bool) string {
	open := map[string]bool{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			return fmt.Sprintf("seq %d at %d", ev.Seq, i)
		}
		switch ev.Type {
		case berth.EventTurnStarted:
			if open[ev.TurnID] {
				return "turn " + ev.TurnID + " started twice"
			}
			open[ev.TurnID] = true
		case berth.EventTurnEnded:
			if !open[ev.TurnID] {
				return "turn " + ev.TurnID + " ended without being open"
			}
			delete(open, ev.TurnID)
		case berth.EventSessionStopped:
			if i != len(evs)-1 {
				return fmt.Sprintf("%d events after session_stopped", len(evs)-1-i)
			}
		}
	}
	if !stopped {
		return ""
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != berth.EventSessionStopped {
		return "no session_stopped at the end"
	}
	if len(open) > 0 {
		var ids []string
		for id := range open {
			ids = append(ids, id)
		}
		return "turns never ended: " + strings.Join(ids, ", ")
	}
	return ""
}
