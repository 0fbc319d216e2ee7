package demoagent

import (
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// elicit asks the client, with elicitation/create in form mode, for one
// required string field "answer" under the message TEXT, then says
// "answer: VALUE", or "elicitation ACTION" when the user declined or the
// question was cancelled (a cancel of the turn ends it cancelled). A
// client that does not offer form elicitations gets "elicitation
// unsupported".
func (t *turn) elicit(args string) error {
	msg := strings.TrimSpace(args)
	if msg == "" {
		return t.say("usage: elicit TEXT")
	}
	if c := t.a.caps().Elicitation; c == nil || c.Form == nil {
		return t.say("elicitation unsupported")
	}
	req := acp.NewUnstableCreateElicitationRequestForm(acp.UnstableElicitationSchema{
		Type:       acp.UnstableElicitationSchemaTypeObject,
		Properties: map[string]any{"answer": map[string]any{"type": "string", "title": "Answer"}},
		Required:   []string{"answer"},
	})
	req.Form.Message = msg

	ectx, done := t.graceCtx()
	defer done()
	resp, err := t.a.conn.UnstableCreateElicitation(ectx, req)
	switch {
	case err != nil:
		if t.ctx.Err() != nil {
			return errCancelled
		}
		return t.say("elicitation error: " + err.Error())
	case resp.Accept != nil:
		return t.say(fmt.Sprintf("answer: %v", resp.Accept.Content["answer"]))
	case resp.Decline != nil:
		return t.say("elicitation decline")
	default:
		if err := t.say("elicitation cancel"); err != nil {
			return err
		}
		if t.ctx.Err() != nil {
			return errCancelled
		}
		return nil
	}
}
