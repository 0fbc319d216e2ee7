package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/elicitschema"
	"github.com/spf13/cobra"
)

// newElicitationsCommand returns `berth elicitations ID [--pending]`.
func newElicitationsCommand() *cobra.Command {
	return askList("elicitations", "List the agent's questions (elicitations) of a session", "only the questions waiting for an answer",
		"ELICITATION\tSTATE\tBY\tMESSAGE\tFIELDS", func(e *berth.Elicitation) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", e.ID, e.State, orDash(e.DecidedBy), shorten(e.Message, 50), shorten(fieldsText(e), 60))
		})
}

// fieldsText names the fields of a form elicitation, a required one
// marked with *, each with its type ("answer* string, n integer"), or
// the URL of a url one.
func fieldsText(e *berth.Elicitation) string {
	if e.Mode == berth.ElicitationModeURL {
		return "url " + e.URL
	}
	form, err := elicitschema.Parse(e.RequestedSchema)
	if err != nil {
		return "-"
	}
	var out []string
	for _, f := range form.Fields {
		name := f.Name
		if slices.Contains(form.Required, f.Name) {
			name += "*"
		}
		out = append(out, name+" "+f.Type)
	}
	return orDash(strings.Join(out, ", "))
}

// newAnswerCommand returns `berth answer ID EID [--field NAME=VALUE…] [--decline | --cancel]`.
func newAnswerCommand() *cobra.Command {
	var fields []string
	var decline, cancel bool
	cmd := &cobra.Command{
		Use:   "answer ID EID [--field NAME=VALUE…] [--decline | --cancel]",
		Short: "Answer a pending elicitation: accept with field values, decline or cancel",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := berth.ElicitationAnswer{Action: berth.ElicitationAccept}
			switch {
			case decline && cancel:
				return usagef(cmd, "--decline and --cancel exclude each other")
			case (decline || cancel) && len(fields) > 0:
				return usagef(cmd, "--field goes with accepting only")
			case decline:
				a.Action = berth.ElicitationDecline
			case cancel:
				a.Action = berth.ElicitationCancel
			}
			if len(fields) > 0 {
				content, err := fieldContent(cmd, args[0], args[1], fields)
				if err != nil {
					return err
				}
				a.Content = content
			}
			path := sessionPath(args[0], "/elicitations/"+url.PathEscape(args[1]))
			return callAPI(cmd, http.MethodPost, path, nil, a, func(w io.Writer, e *berth.Elicitation) error {
				_, err := fmt.Fprintf(w, "%s: %s\n", e.ID, e.State)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVar(&fields, "field", nil, "a field's value, NAME=VALUE (repeatable); typed as the form says")
	cmd.Flags().BoolVar(&decline, "decline", false, "decline to answer")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "dismiss the question")
	return cmd
}

// fieldContent reads the elicitation's form and types each NAME=VALUE
// as its field says.
func fieldContent(cmd *cobra.Command, id, eid string, fields []string) (map[string]any, error) {
	_, c, err := dialFor(cmd)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	e, err := c.GetElicitation(cmd.Context(), id, eid)
	if err != nil {
		return nil, err
	}
	form, err := elicitschema.Parse(e.RequestedSchema)
	if err != nil && e.Mode == berth.ElicitationModeForm {
		return nil, err
	}
	content := map[string]any{}
	for _, kv := range fields {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, usagef(cmd, "--field takes NAME=VALUE, not %q", kv)
		}
		v, err := typedValue(form, name, value)
		if err != nil {
			return nil, usagef(cmd, "--field %s: %v", name, err)
		}
		content[name] = v
	}
	return content, nil
}

// typedValue turns what was typed for a field into the JSON value of its
// type: a number, a boolean, a list (comma-separated) or the text. A name
// the form lacks stays text, for the daemon to refuse by name.
func typedValue(form *elicitschema.Form, name, value string) (any, error) {
	if form == nil {
		return value, nil
	}
	i := slices.IndexFunc(form.Fields, func(f elicitschema.Field) bool { return f.Name == name })
	if i < 0 {
		return value, nil
	}
	switch form.Fields[i].Type {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", value)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", value)
		}
		return n, nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", value)
		}
		return b, nil
	case "array":
		var out []string
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, nil
	}
	return value, nil
}

// askElicitation puts an elicitation to the user at the terminal: each
// field of the form in turn (Enter leaves an optional one out), or the
// URL to open. A line "/decline" declines, "/cancel" dismisses; the end
// of the input cancels. Content the daemon refuses is asked again.
func (a *asker) askElicitation(ctx context.Context, sessionID string, e *berth.Elicitation) error {
	pending, err := a.client.ListElicitations(ctx, sessionID, berth.ElicitationPending)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pending, func(q *berth.Elicitation) bool { return q.ID == e.ID }) {
		return nil
	}
	for {
		ans, ok := a.fillElicitation(ctx, e)
		if !ok {
			return nil
		}
		_, err := a.client.AnswerElicitation(ctx, sessionID, e.ID, ans)
		switch {
		case berth.IsCode(err, berth.EConflict):
			fmt.Fprintf(a.out, "elicitation %s was already answered\n", e.ID)
			return nil
		case berth.IsCode(err, berth.EInvalid):
			fmt.Fprintf(a.out, "%s\n", errorText(err))
			continue
		}
		return err
	}
}

// fillElicitation reads one answer; false when ctx ended first.
func (a *asker) fillElicitation(ctx context.Context, e *berth.Elicitation) (berth.ElicitationAnswer, bool) {
	a.start()
	read := func(prompt string) (string, bool, bool) {
		fmt.Fprint(a.out, prompt)
		select {
		case line, ok := <-a.lines:
			return strings.TrimSpace(line), ok, true
		case <-ctx.Done():
			fmt.Fprintln(a.out)
			return "", false, false
		}
	}
	fmt.Fprintf(a.out, "? %s  (/decline, /cancel)\n", printable(e.Message))
	if e.Mode == berth.ElicitationModeURL {
		line, ok, live := read(fmt.Sprintf("  open %s — Enter when done: ", printable(e.URL)))
		if !live {
			return berth.ElicitationAnswer{}, false
		}
		return answerOf(line, ok, nil), true
	}
	form, err := elicitschema.Parse(e.RequestedSchema)
	if err != nil {
		fmt.Fprintf(a.out, "the form cannot be shown (%s): cancelled\n", errorText(err))
		return berth.ElicitationAnswer{Action: berth.ElicitationCancel}, true
	}
	content := map[string]any{}
	for _, f := range form.Fields {
		for {
			label, hint := fieldLabel(f)
			line, ok, live := read(fmt.Sprintf("  %s [%s]: ", printable(label), printable(hint)))
			if !live {
				return berth.ElicitationAnswer{}, false
			}
			if !ok || line == "/decline" || line == "/cancel" {
				return answerOf(line, ok, nil), true
			}
			if line == "" {
				if slices.Contains(form.Required, f.Name) {
					fmt.Fprintln(a.out, "  required")
					continue
				}
				break
			}
			v, err := typedValue(form, f.Name, line)
			if err != nil {
				fmt.Fprintf(a.out, "  %v\n", err)
				continue
			}
			content[f.Name] = v
			break
		}
	}
	return berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: content}, true
}

// fieldLabel is how a form's field is asked for: its title and name, and
// what it takes (its type, or its choices).
func fieldLabel(f elicitschema.Field) (label, hint string) {
	label = f.Name
	if f.Title != "" && f.Title != f.Name {
		label = f.Title + " (" + f.Name + ")"
	}
	hint = f.Type
	if len(f.Enum) > 0 {
		hint = strings.Join(f.Enum, "|")
	}
	return label, hint
}

// answerOf is the answer a control line gives: /decline, /cancel, the
// input's end (cancel) or anything else (accept with content).
func answerOf(line string, ok bool, content map[string]any) berth.ElicitationAnswer {
	switch {
	case !ok:
		return berth.ElicitationAnswer{Action: berth.ElicitationCancel}
	case line == "/decline":
		return berth.ElicitationAnswer{Action: berth.ElicitationDecline}
	case line == "/cancel":
		return berth.ElicitationAnswer{Action: berth.ElicitationCancel}
	}
	return berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: content}
}

// elicitationOfEvent decodes the elicitation of an elicitation_requested event.
func elicitationOfEvent(ev berth.Event) (*berth.Elicitation, bool) {
	var d struct {
		Elicitation berth.Elicitation `json:"elicitation"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil || d.Elicitation.ID == "" {
		return nil, false
	}
	return &d.Elicitation, true
}
