package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/elicitschema"
)

// attachElicitHelp is what /help adds about the agent's questions.
const attachElicitHelp = `While the agent's question (an elicitation) is open, each line answers its next field:
  /skip             leave an optional field out
  /decline          decline to answer   /dismiss   dismiss the question`

// openForm is an elicitation being answered in berth attach: the field
// asked next and what was typed so far.
type openForm struct {
	e       *berth.Elicitation
	form    *elicitschema.Form
	next    int
	content map[string]any
}

// newOpenForm returns the form of e; a form the schema checker refuses
// has no fields (it can only be declined or dismissed).
func newOpenForm(e *berth.Elicitation) *openForm {
	f := &openForm{e: e, content: map[string]any{}}
	if e.Mode == berth.ElicitationModeForm {
		f.form, _ = elicitschema.Parse(e.RequestedSchema)
	}
	if f.form == nil {
		f.form = &elicitschema.Form{}
	}
	return f
}

// elicitationEvent keeps the open questions up to date; seen is the last
// seq read before following (replayed questions come from the pending list).
func (a *attached) elicitationEvent(ev berth.Event, seen int64) {
	switch ev.Type {
	case berth.EventElicitationRequested:
		if ev.Seq <= seen {
			return
		}
		if e, ok := elicitationOfEvent(ev); ok {
			a.forms = append(a.forms, newOpenForm(e))
			if len(a.forms) == 1 && len(a.questions) == 0 {
				a.askForm()
			}
		}
	case berth.EventElicitationResolved:
		id := decodeData(ev).str("elicitation_id")
		for i, f := range a.forms {
			if f.e.ID == id {
				a.forms = append(a.forms[:i], a.forms[i+1:]...)
				if i == 0 && len(a.questions) == 0 {
					a.askForm()
				}
				break
			}
		}
	}
}

// askForm puts the first open question's next field (or its URL).
func (a *attached) askForm() {
	if len(a.forms) == 0 {
		return
	}
	f := a.forms[0]
	if f.next == 0 {
		a.r.line(a.r.style(ansiBold, "? "+printable(f.e.Message)+"  (/decline, /dismiss)"))
	}
	if f.e.Mode == berth.ElicitationModeURL {
		a.r.line(fmt.Sprintf("  open %s, then type ok", printable(f.e.URL)))
		return
	}
	if f.next >= len(f.form.Fields) {
		return
	}
	fd := f.form.Fields[f.next]
	label, hint := fieldLabel(fd)
	if !slices.Contains(f.form.Required, fd.Name) {
		hint += ", /skip"
	}
	a.r.line(fmt.Sprintf("  %s [%s]:", printable(label), printable(hint)))
}

// formInput answers the open question with a typed line; false when no
// question is open or the line is a command of its own.
func (a *attached) formInput(ctx context.Context, line string) bool {
	if len(a.forms) == 0 || len(a.questions) > 0 {
		return false
	}
	f := a.forms[0]
	var ans *berth.ElicitationAnswer
	switch {
	case line == "/decline":
		ans = &berth.ElicitationAnswer{Action: berth.ElicitationDecline}
	case line == "/dismiss":
		ans = &berth.ElicitationAnswer{Action: berth.ElicitationCancel}
	case strings.HasPrefix(line, "/") && line != "/skip":
		return false
	case f.e.Mode == berth.ElicitationModeURL:
		ans = &berth.ElicitationAnswer{Action: berth.ElicitationAccept}
	case f.next < len(f.form.Fields):
		fd := f.form.Fields[f.next]
		if line == "/skip" {
			if slices.Contains(f.form.Required, fd.Name) {
				a.r.line("  required")
				return true
			}
		} else {
			v, err := typedValue(f.form, fd.Name, line)
			if err != nil {
				a.r.line("  " + err.Error())
				return true
			}
			f.content[fd.Name] = v
		}
		f.next++
		if f.next < len(f.form.Fields) {
			a.askForm()
			return true
		}
		ans = &berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: f.content}
	default:
		ans = &berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: f.content}
	}
	_, err := a.c.AnswerElicitation(ctx, a.id, f.e.ID, *ans)
	switch {
	case err == nil, berth.IsCode(err, berth.EConflict):
		// The elicitation_resolved event moves on to the next question.
	case berth.IsCode(err, berth.EInvalid):
		// Refused by the agent's schema: the form is asked again.
		a.r.line("! " + errorText(err))
		f.next, f.content = 0, map[string]any{}
		a.askForm()
	default:
		a.r.line("! " + errorText(err))
	}
	return true
}
