package live

import (
	"context"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// TestALostCancelIsSentAgain: an agent that lost a session/cancel (as the
// ACP Go SDK can lose one right behind its prompt) is sent it again, ends
// the turn cancelled well within limits.cancel_grace and goes on; the next
// turn runs in full.
func TestALostCancelIsSentAgain(t *testing.T) {
	const grace = 5 * time.Second
	hs := newHarness(t, func(h *Host) {
		h.Limits.CancelGrace = grace
		h.Prepare = func(s *berth.Session, spec berth.AgentSpec, p berth.SandboxProvider) AgentStart {
			st := prepareDemo(s, spec, p)
			st.Box.Env[agentEnvVar] = agentLosesFirstCancel
			return st
		}
	})
	ls := hs.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: "sleep 60000"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ls.Prompt(ctx, berth.ModeQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := ls.CancelTurn(); err != nil {
		t.Fatal(err)
	}
	res, _, err := ls.WaitTurn(ctx, r.TurnID)
	if err != nil || res == nil || res.StopReason != berth.TurnCancelled {
		t.Fatalf("cancelled turn = %+v %v", res, err)
	}
	if took := time.Since(began); took >= grace {
		t.Fatalf("the turn ended %s after its cancel: the agent was killed", took)
	}
	if v := ls.View(); v.State != berth.StateActive {
		t.Fatalf("after the cancel the session is %s (%+v)", v.State, v.Failure)
	}
	if res := hs.prompt(ls, "echo after"); res.StopReason != berth.TurnEndTurn || res.Text != "after" {
		t.Fatalf("next turn = %+v", res)
	}
}
