package live

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/store/memory"
)

// A question's record is listed pending a moment before the question
// waits. A user who found it there in that moment and answered it is
// answered as if a moment later: the decision holds and the agent hears
// it, instead of a conflict for a question that is, in the list, pending.
func TestAQuestionListedBeforeItWaitsIsDecided(t *testing.T) {
	gate := &arrivalGate{Store: memory.New()}
	hs := newHarness(t, func(h *Host) {
		h.Store = gate
		h.Limits.PermissionTimeout = time.Hour
	})
	ls := hs.start()
	h := ls.conv.handler
	ctx := context.Background()

	// A permission request the user answers while its record is written.
	type decided struct {
		p   *berth.Permission
		err error
	}
	decisions := make(chan decided, 1)
	// A refused decision ends the request, which would otherwise wait.
	askCtx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	gate.afterCreate = func(id string) {
		go func() {
			p, err := ls.Decide(ctx, id, berth.PermissionDecided, "allow", berth.DecidedByUser)
			if err != nil {
				giveUp()
			}
			decisions <- decided{p, err}
		}()
		// The decider's chance to find the request not yet waiting.
		select {
		case d := <-decisions:
			decisions <- d
		case <-time.After(200 * time.Millisecond):
		}
	}
	resp, err := h.RequestPermission(askCtx, acp.RequestPermissionRequest{SessionID: "acp",
		ToolCall: json.RawMessage(`{"toolCallId":"t1","kind":"edit","title":"edit a file"}`),
		Options:  []acp.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}, {OptionID: "reject", Name: "Reject", Kind: "reject_once"}}})
	if err != nil || resp.Outcome.Outcome != "selected" || resp.Outcome.OptionID != "allow" {
		t.Fatalf("the agent heard %+v %v, want allow", resp, err)
	}
	if d := <-decisions; d.err != nil || d.p.State != berth.PermissionDecided || d.p.DecidedBy != berth.DecidedByUser {
		t.Fatalf("the user's decision: %+v %v", d.p, d.err)
	}

	// An elicitation the same way.
	type resolved struct {
		e   *berth.Elicitation
		err error
	}
	answers := make(chan resolved, 1)
	elicCtx, giveUpElic := context.WithCancel(ctx)
	defer giveUpElic()
	gate.afterCreate = func(id string) {
		go func() {
			e, err := ls.ResolveElicitation(ctx, id, berth.ElicitationDecline, nil, berth.DecidedByUser)
			if err != nil {
				giveUpElic()
			}
			answers <- resolved{e, err}
		}()
		select {
		case a := <-answers:
			answers <- a
		case <-time.After(200 * time.Millisecond):
		}
	}
	eresp, err := h.CreateElicitation(elicCtx, acp.CreateElicitationRequest{Mode: "form", Message: "name?"})
	if err != nil || eresp.Action != berth.ElicitationDecline {
		t.Fatalf("the agent heard %+v %v, want decline", eresp, err)
	}
	if a := <-answers; a.err != nil || a.e.Action != berth.ElicitationDecline {
		t.Fatalf("the user's answer: %+v %v", a.e, a.err)
	}
	if v := ls.View(); v.PendingPermissions != 0 || v.PendingElicitations != 0 {
		t.Fatalf("the session still counts questions: %+v", v)
	}
}

// arrivalGate is a store that runs afterCreate, once a question's record
// is written, before the asker goes on.
type arrivalGate struct {
	berth.Store
	afterCreate func(id string)
}

func (g *arrivalGate) CreatePermission(ctx context.Context, p *berth.Permission) error {
	if err := g.Store.CreatePermission(ctx, p); err != nil {
		return err
	}
	g.afterCreate(p.ID)
	return nil
}

func (g *arrivalGate) CreateElicitation(ctx context.Context, e *berth.Elicitation) error {
	if err := g.Store.CreateElicitation(ctx, e); err != nil {
		return err
	}
	g.afterCreate(e.ID)
	return nil
}
