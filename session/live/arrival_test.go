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
	askCtx, decisions := answerOnCreate(t, gate, func(id string) (*berth.Permission, error) {
		return ls.Decide(ctx, id, berth.PermissionDecided, "allow", berth.DecidedByUser)
	})
	resp, err := h.RequestPermission(askCtx, acp.RequestPermissionRequest{SessionID: "acp",
		ToolCall: json.RawMessage(`{"toolCallId":"t1","kind":"edit","title":"edit a file"}`),
		Options:  []acp.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}, {OptionID: "reject", Name: "Reject", Kind: "reject_once"}}})
	if err != nil || resp.Outcome.Outcome != "selected" || resp.Outcome.OptionID != "allow" {
		t.Fatalf("the agent heard %+v %v, want allow", resp, err)
	}
	if d := <-decisions; d.err != nil || d.v.State != berth.PermissionDecided || d.v.DecidedBy != berth.DecidedByUser {
		t.Fatalf("the user's decision: %+v %v", d.v, d.err)
	}

	// An elicitation the same way.
	elicCtx, answers := answerOnCreate(t, gate, func(id string) (*berth.Elicitation, error) {
		return ls.ResolveElicitation(ctx, id, berth.ElicitationDecline, nil, berth.DecidedByUser)
	})
	eresp, err := h.CreateElicitation(elicCtx, acp.CreateElicitationRequest{Mode: "form", Message: "name?"})
	if err != nil || eresp.Action != berth.ElicitationDecline {
		t.Fatalf("the agent heard %+v %v, want decline", eresp, err)
	}
	if a := <-answers; a.err != nil || a.v.Action != berth.ElicitationDecline {
		t.Fatalf("the user's answer: %+v %v", a.v, a.err)
	}
	if v := ls.View(); v.PendingPermissions != 0 || v.PendingElicitations != 0 {
		t.Fatalf("the session still counts questions: %+v", v)
	}
}

// answered is what a user's answer returned.
type answered[T any] struct {
	v   T
	err error
}

// answerOnCreate has gate answer the next question (answer) once its
// record is written, while its asker is held, giving the answer a moment
// to find the question not yet waiting. It returns the context to ask
// in, ended when the answer is refused (the asker would wait for good),
// and where the answer's result comes.
func answerOnCreate[T any](t *testing.T, gate *arrivalGate, answer func(id string) (T, error)) (context.Context, <-chan answered[T]) {
	ctx, giveUp := context.WithCancel(context.Background())
	t.Cleanup(giveUp)
	out := make(chan answered[T], 1)
	gate.afterCreate = func(id string) {
		go func() {
			v, err := answer(id)
			if err != nil {
				giveUp()
			}
			out <- answered[T]{v, err}
		}()
		select {
		case a := <-out:
			out <- a
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ctx, out
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
