package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// ev builds an event with data v.
func ev(seq int64, typ string, v any) berth.Event {
	e := berth.NewEvent("ses_a", "turn_1", typ, v)
	e.Seq = seq
	return e
}

func TestRenderEvent(t *testing.T) {
	var buf bytes.Buffer
	events := []berth.Event{
		ev(1, berth.EventSessionStarted, map[string]any{"protocol_version": 1}),
		ev(2, berth.EventTurnStarted, map[string]any{"text": "hi", "source": "user"}),
		ev(3, berth.EventAgentThought, map[string]any{"text": "let me\nthink"}),
		ev(4, berth.EventAgentMessage, map[string]any{"text": "Hel"}),
		ev(5, berth.EventAgentMessage, map[string]any{"text": "lo"}),
		ev(6, berth.EventToolCall, map[string]any{"tool_call_id": "t1", "title": "Write a.txt", "kind": "edit", "status": "pending"}),
		ev(7, berth.EventToolCallUpdate, map[string]any{"tool_call_id": "t1", "status": "completed"}),
		ev(8, berth.EventAgentMessage, map[string]any{"text": "done\n"}),
		ev(9, berth.EventTurnEnded, map[string]any{"stop_reason": "end_turn"}),
		ev(10, berth.EventTurnStarted, map[string]any{"text": "next", "source": "queue"}),
		ev(11, berth.EventAgentMessage, map[string]any{"text": "ok"}),
		ev(12, berth.EventTurnEnded, map[string]any{"stop_reason": "error", "error": map[string]any{"code": "auth_required", "message": "log in"}}),
	}
	r := newEventRenderer(&buf)
	for _, e := range events {
		r.render(e)
	}
	want := "│ let me\n│ think\nHello\n→ Write a.txt [edit]\n  ✓ Write a.txt completed\ndone\n[end_turn]\n» (queue) next\nok\n[error: log in]\n"
	if got := buf.String(); got != want {
		t.Errorf("rendered:\n%q\nwant:\n%q", got, want)
	}
}

func TestLogLine(t *testing.T) {
	var buf bytes.Buffer
	e := ev(42, berth.EventAgentMessage, map[string]any{"text": "line one\nline two"})
	e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	// Each event's turn, a column of one width, "-" outside a turn.
	turn := "turn_01m8kpdgc4pth6qeymkec8pvdv"
	for _, id := range []string{turn, ""} {
		buf.Reset()
		e.TurnID = id
		if err := writeLogLine(&buf, e); err != nil {
			t.Fatal(err)
		}
		if want := "    42  03:04:05.000  " + orDash(id) + strings.Repeat(" ", len(turn)-len(orDash(id))) + "  agent_message         line one⏎line two\n"; buf.String() != want {
			t.Errorf("log line = %q, want %q", buf.String(), want)
		}
	}
	// Unknown types show their data, cut short.
	long := ev(1, "future_type", json.RawMessage(`{"x":"`+strings.Repeat("y", 300)+`"}`))
	if s := summarize(long); !strings.HasPrefix(s, `{"x":"yyy`) || len([]rune(s)) != 100 {
		t.Errorf("summary = %q", s)
	}
	if s := summarize(ev(1, berth.EventToolCall, map[string]any{"title": "Read", "kind": "read", "tool_call_id": "t9"})); s != "Read kind=read id=t9" {
		t.Errorf("tool call summary = %q", s)
	}
	pruned := ev(1, berth.EventCheckpointPruned, map[string]any{"checkpoint_id": "ckpt_1", "turn_id": "turn_1", "session_id": "ses_kid",
		"freed_bytes": 8192, "removed_bytes": 4096, "tree_bytes": 65536})
	if s := summarize(pruned); s != "ckpt_1 session=ses_kid freed=8192 tree=65536" {
		t.Errorf("checkpoint_pruned summary = %q", s)
	}
}

// What an agent or a user wrote never reaches the terminal as control
// characters: escape sequences in a message, a stderr line, a tool title
// or a session name are printed escaped, in the live view, in `berth logs`
// and in `berth show`; line endings stay line endings.
func TestControlCharactersAreEscaped(t *testing.T) {
	evil := "title\x1b]0;pwned\x07\x1b[2J\u009bX\rhidden"
	var buf bytes.Buffer
	r := newEventRenderer(&buf)
	r.render(ev(1, berth.EventAgentMessage, map[string]any{"text": evil + "\r\nnext line\n"}))
	r.render(ev(2, berth.EventToolCall, map[string]any{"tool_call_id": "t1", "title": evil}))
	if err := writeLogLine(&buf, ev(3, berth.EventAgentStderr, map[string]any{"line": evil})); err != nil {
		t.Fatal(err)
	}
	if err := writeSession(&buf, &berth.Session{ID: "ses_a", Name: evil}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, c := range []string{"\x1b", "\x07", "\u009b", "\r"} {
		if strings.Contains(out, c) {
			t.Errorf("the output holds the control character %q:\n%q", c, out)
		}
	}
	if !strings.Contains(out, `title\x1b]0;pwned\x07\x1b[2J\u009bX\x0dhidden`) || !strings.Contains(out, "\nnext line\n") {
		t.Errorf("escaped output:\n%s", out)
	}
}

// ago says "in …" for a time to come (an expiry), not "now".
func TestAgoOfATimeToCome(t *testing.T) {
	for d, want := range map[time.Duration]string{-90 * time.Second: "1m ago", 58*time.Minute + 30*time.Second: "in 58m", 3 * time.Hour: "in 3h", 0: "now"} {
		if got := ago(time.Now().Add(d)); got != want && !(d == 0 && got == "0s ago") {
			t.Errorf("ago(now%+v) = %q, want %q", d, got, want)
		}
	}
}

// logsShowData are the kinds `berth logs` shows by summarize's default,
// their compact data cut short: it is short, or the agent's own.
var logsShowData = []string{
	berth.EventPlan, berth.EventModeUpdate, berth.EventConfigUpdate, berth.EventCommandsUpdate,
	berth.EventRuntimeRecovered, berth.EventACPUnknown, berth.EventConversationCleared,
	berth.EventChildStarted, berth.EventChildStopped,
}

// attachSkips are the kinds `berth attach` does not show (render's
// default): bookkeeping, or what the conversation already says.
var attachSkips = []string{
	berth.EventSessionCreated, berth.EventSessionStarted, berth.EventUserMessage, berth.EventUsage,
	berth.EventModeUpdate, berth.EventConfigUpdate, berth.EventCommandsUpdate,
	berth.EventPromptQueued, berth.EventPromptCanceled, berth.EventPromptSteered,
	berth.EventFileRead, berth.EventRuntimeRecovered, berth.EventAgentStderr, berth.EventACPUnknown,
	berth.EventConversationCleared, berth.EventChildStarted, berth.EventChildStopped,
	berth.EventCheckpointCreated, berth.EventCheckpointPruned, berth.EventModelCall,
}

// rootConsts returns the string constants of the root package by name.
func rootConsts(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			decl, ok := d.(*ast.GenDecl)
			if !ok || decl.Tok != token.CONST {
				continue
			}
			for _, spec := range decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// typeCases returns the event types of the cases of each `switch ev.Type`
// in function fn of render.go (a method is named by its name alone).
func typeCases(t *testing.T, fn string) []string {
	t.Helper()
	consts := rootConsts(t)
	src, err := os.ReadFile("render.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "render.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn {
			continue
		}
		found = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok || exprText(sw.Tag) != "ev.Type" {
				return true
			}
			for _, c := range sw.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					sel, ok := e.(*ast.SelectorExpr)
					v, known := "", false
					if ok && exprText(sel.X) == "berth" {
						v, known = consts[sel.Sel.Name]
					}
					if !known {
						t.Fatalf("%s: case %s is not a berth.Event… constant", fn, exprText(e))
					}
					out = append(out, v)
				}
			}
			return true
		})
	}
	if !found || len(out) == 0 {
		t.Fatalf("render.go has no func %s with a switch on ev.Type", fn)
	}
	return out
}

// exprText is the text of an identifier or a selector ("ev.Type").
func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	}
	return ""
}

// checkCovers checks that every declared event kind is either a case of
// the switches on the type of fn (and the functions it hands the rest to,
// more) or named in byDefault, not both, and that both name declared
// kinds only.
func checkCovers(t *testing.T, fn string, byDefault []string, listName string, more ...string) {
	t.Helper()
	cases := typeCases(t, fn)
	for _, f := range more {
		cases = append(cases, typeCases(t, f)...)
	}
	for _, name := range append(slices.Clone(cases), byDefault...) {
		if !berth.IsEventKind(name) {
			t.Errorf("%s: %q is not a declared event kind", fn, name)
		}
	}
	for _, k := range berth.EventKinds() {
		inCases, inDefault := slices.Contains(cases, k.Name), slices.Contains(byDefault, k.Name)
		switch {
		case !inCases && !inDefault:
			t.Errorf("%s does not render %q: add a case, or add it to %s if its default is meant", fn, k.Name, listName)
		case inCases && inDefault:
			t.Errorf("%s renders %q, which %s says it leaves to its default", fn, k.Name, listName)
		}
	}
}

// `berth logs` (summarize) and `berth attach` (render) each render every
// declared event kind, or leave it to their default on purpose.
func TestRenderFollowsEveryEventKind(t *testing.T) {
	checkCovers(t, "summarize", logsShowData, "logsShowData")
	checkCovers(t, "render", attachSkips, "attachSkips", "note")
}

// What the defaults do for the kinds left to them: summarize shows the
// compact data, render writes nothing.
func TestRenderDefaults(t *testing.T) {
	for _, name := range logsShowData {
		if got := summarize(ev(1, name, map[string]any{"probe": 1})); got != `{"probe":1}` {
			t.Errorf("berth logs, %s: %q", name, got)
		}
	}
	var buf strings.Builder
	r := newEventRenderer(&buf)
	r.showPrompts = true
	for _, name := range attachSkips {
		r.render(ev(1, name, map[string]any{"text": "t", "line": "l", "id": "c"}))
		if buf.Len() > 0 {
			t.Errorf("berth attach, %s: wrote %q", name, buf.String())
			buf.Reset()
		}
	}
}
