package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/berth-sh/berth"
)

// ANSI styles for a terminal.
const (
	ansiDim   = "\x1b[2m"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// eventData is an event's data decoded loosely, for display.
type eventData map[string]any

// decodeData decodes an event's data; data that is not an object gives an
// empty map.
func decodeData(ev berth.Event) eventData {
	var d eventData
	if err := json.Unmarshal(ev.Data, &d); err != nil || d == nil {
		return eventData{}
	}
	return d
}

// attached counts a turn_started's non-text content blocks ("" for none).
func (d eventData) attached() string {
	blocks, _ := d["content"].([]any)
	n := 0
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok && m["type"] != "text" {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

// str returns the field at path (keys into nested objects) as text, "" when
// absent.
func (d eventData) str(path ...string) string {
	var v any = map[string]any(d)
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return printable(x)
	case float64:
		return fmt.Sprintf("%v", x)
	case bool:
		return fmt.Sprintf("%t", x)
	default:
		b, _ := json.Marshal(x)
		return printable(string(b))
	}
}

// printable escapes the control characters of text an agent or a user
// wrote (newlines and tabs aside) as \xHH or \u00HH, so that nothing it
// prints can move the cursor, retitle the window or hide text in the
// terminal: agents' stderr is full of escape sequences, some on purpose.
func printable(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	// A line ending of another system is a line ending, not a control.
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	for _, r := range s {
		switch {
		case !isControl(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// isControl reports a C0 or C1 control character, or DEL, other than
// newline and tab.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f))
}

// shorten puts text on one line and cuts it to n runes.
func shorten(s string, n int) string {
	s = printable(strings.NewReplacer("\r\n", "⏎", "\n", "⏎", "\r", "", "\t", " ").Replace(s))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// summarize renders an event's data on one short line, for `berth logs`.
func summarize(ev berth.Event) string {
	d := decodeData(ev)
	join := func(parts ...string) string {
		var out []string
		for _, p := range parts {
			if p != "" {
				out = append(out, p)
			}
		}
		return strings.Join(out, " ")
	}
	kv := func(k, v string) string {
		if v == "" {
			return ""
		}
		return k + "=" + v
	}
	switch ev.Type {
	case berth.EventAgentMessage, berth.EventAgentThought, berth.EventUserMessage:
		return shorten(d.str("text"), 100)
	case berth.EventTurnStarted:
		return join(kv("source", d.str("source")), kv("attached", d.attached()), shorten(d.str("text"), 80))
	case berth.EventTurnEnded:
		return join(d.str("stop_reason"), shorten(d.str("error", "message"), 80))
	case berth.EventToolCall:
		return join(shorten(d.str("title"), 60), kv("kind", d.str("kind")), kv("status", d.str("status")), kv("id", d.str("tool_call_id")))
	case berth.EventToolCallUpdate:
		return join(kv("id", d.str("tool_call_id")), kv("status", d.str("status")))
	case berth.EventSessionCreated:
		return join(kv("agent", d.str("agent")), kv("sandbox", d.str("sandbox")))
	case berth.EventSessionStarted:
		return join(kv("resumed_by", d.str("resumed_by")), kv("protocol", d.str("protocol_version")))
	case berth.EventSessionStopped:
		return join(d.str("stop_reason"), shorten(d.str("failure", "message"), 80))
	case berth.EventPromptQueued, berth.EventPromptCanceled, berth.EventPromptSteered:
		return kv("entry", d.str("entry_id"))
	case berth.EventPermissionRequested:
		return join(kv("id", d.str("permission", "id")), shorten(d.str("permission", "tool_call", "title"), 60))
	case berth.EventPermissionResolved:
		return join(kv("id", d.str("permission_id")), kv("option", d.str("option_id")), kv("by", d.str("decided_by")))
	case berth.EventElicitationRequested:
		return join(kv("id", d.str("elicitation", "id")), shorten(d.str("elicitation", "message"), 60))
	case berth.EventElicitationResolved:
		return join(kv("id", d.str("elicitation_id")), kv("action", d.str("action")), kv("by", d.str("decided_by")))
	case berth.EventFileRead, berth.EventFileWritten, berth.EventFileRefused:
		return join(d.str("path"), kv("bytes", d.str("bytes")))
	case berth.EventTerminalStarted, berth.EventTerminalExited, berth.EventExec:
		return join(shorten(d.str("command"), 60), kv("exit", d.str("exit_code")))
	case berth.EventUsage:
		return join(kv("used", d.str("used")), kv("size", d.str("size")), kv("cost", d.str("cost")))
	case berth.EventModelCall:
		return join(d.str("upstream"), shorten(d.str("model"), 40), kv("status", d.str("status")), kv("in", d.str("input_tokens")),
			kv("out", d.str("output_tokens")), kv("cost", d.str("cost_usd")), kv("ms", d.str("duration_ms")))
	case berth.EventBudgetExceeded:
		return join(d.str("limit"), kv("max", d.str("max")), kv("spent", d.str("spent")))
	case berth.EventNetworkDenied:
		return shorten(d.str("host"), 80) + ":" + d.str("port")
	case berth.EventRuntimeWarning:
		return shorten(d.str("reason"), 100)
	case berth.EventAgentFetch:
		return join(d.str("package"), d.str("phase"), kv("ms", d.str("elapsed_ms")), shorten(d.str("error"), 80))
	case berth.EventAgentStderr:
		return shorten(d.str("line"), 100)
	case berth.EventCheckpointCreated:
		return join(d.str("id"), kv("files", d.str("files")), kv("bytes", d.str("bytes")), kv("skipped", d.str("skipped")))
	case berth.EventWorkspaceRewound:
		return join(kv("to", d.str("checkpoint_id")), kv("written", d.str("written")), kv("removed", d.str("removed")))
	case berth.EventCheckpointPruned:
		return join(d.str("checkpoint_id"), kv("session", d.str("session_id")), kv("freed", d.str("freed_bytes")), kv("tree", d.str("tree_bytes")))
	}
	var buf bytes.Buffer
	if json.Compact(&buf, ev.Data) != nil {
		return ""
	}
	return shorten(buf.String(), 100)
}

// writeLogLine writes one event as a `berth logs` line: seq, local time,
// type and a short rendering of its data.
func writeLogLine(w io.Writer, ev berth.Event) error {
	_, err := fmt.Fprintf(w, "%6d  %s  %-*s  %-20s  %s\n", ev.Seq, ev.Time.Local().Format("15:04:05.000"),
		turnColumn, orDash(printable(ev.TurnID)), ev.Type, summarize(ev))
	return err
}

// turnColumn is the width of a log line's turn id (turn_ and a ULID).
const turnColumn = len("turn_") + 26

// eventRenderer writes a session's events to a terminal as a conversation:
// the agent's message text inline as it streams, thoughts dimmed and
// prefixed, one line per tool call and notable event, and the stop reason
// of each turn. It keeps the state that needs (is a line open, tool call
// titles), so one renderer serves one stream.
type eventRenderer struct {
	w     io.Writer
	color bool
	// midLine is set when the last text written did not end its line.
	midLine bool
	// inThought is set while agent_thought chunks stream.
	inThought bool
	// titles remembers tool call titles for their updates.
	titles map[string]string
	// showPrompts shows every turn's prompt (berth attach: other clients
	// send them too), not only those from the queue or a steer.
	showPrompts bool
}

// newEventRenderer returns a renderer writing to w, with ANSI styles when w
// is a terminal and NO_COLOR is not set.
func newEventRenderer(w io.Writer) *eventRenderer {
	return &eventRenderer{w: w, color: isTerminal(w) && os.Getenv("NO_COLOR") == "", titles: map[string]string{}}
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// style wraps s in an ANSI style when colors are on.
func (r *eventRenderer) style(code, s string) string {
	if !r.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// endLine closes an open line so that what follows starts on its own.
func (r *eventRenderer) endLine() {
	if r.midLine {
		io.WriteString(r.w, "\n")
		r.midLine = false
	}
	r.inThought = false
}

// line writes one full line of its own.
func (r *eventRenderer) line(s string) {
	r.endLine()
	io.WriteString(r.w, s+"\n")
}

// text writes streamed text, with prefix at the start of each new line.
func (r *eventRenderer) text(s, prefix, code string) {
	if s == "" {
		return
	}
	var b strings.Builder
	for i, part := range strings.SplitAfter(s, "\n") {
		if part == "" {
			continue
		}
		if (i > 0 || !r.midLine) && prefix != "" {
			b.WriteString(r.style(code, prefix))
		}
		b.WriteString(r.style(code, part))
	}
	io.WriteString(r.w, b.String())
	r.midLine = !strings.HasSuffix(s, "\n")
}

// render writes one event.
func (r *eventRenderer) render(ev berth.Event) {
	d := decodeData(ev)
	switch ev.Type {
	case berth.EventAgentMessage:
		if r.inThought {
			r.endLine()
		}
		r.text(d.str("text"), "", "")
	case berth.EventAgentThought:
		if !r.inThought {
			r.endLine()
			r.inThought = true
		}
		r.text(d.str("text"), "│ ", ansiDim)
	case berth.EventTurnStarted:
		// The user typed their own prompt; show only those that came from
		// the queue or a steer.
		if src := d.str("source"); src != "" && src != "user" {
			r.line(r.style(ansiDim, fmt.Sprintf("» (%s) %s", src, shorten(d.str("text"), 100))))
		} else if r.showPrompts {
			r.line(r.style(ansiBold, "» "+shorten(d.str("text"), 200)))
		}
	case berth.EventToolCall:
		id, title := d.str("tool_call_id"), d.str("title")
		if title == "" {
			title = "tool call"
		}
		r.titles[id] = title
		kind := d.str("kind")
		if kind != "" {
			kind = " " + r.style(ansiDim, "["+kind+"]")
		}
		r.line(r.style(ansiBold, "→ "+shorten(title, 100)) + kind)
	case berth.EventToolCallUpdate:
		switch status := d.str("status"); status {
		case "completed", "failed":
			mark := "✓"
			if status == "failed" {
				mark = "✗"
			}
			r.line(r.style(ansiDim, fmt.Sprintf("  %s %s %s", mark, shorten(r.titles[d.str("tool_call_id")], 80), status)))
		}
	case berth.EventPlan:
		r.line(r.style(ansiDim, "plan:"))
		if entries, ok := d["entries"].([]any); ok {
			for _, e := range entries {
				ed, _ := e.(map[string]any)
				r.line(r.style(ansiDim, fmt.Sprintf("  - [%s] %s", orDash(eventData(ed).str("status")), shorten(eventData(ed).str("content"), 100))))
			}
		}
	default:
		r.note(ev, d)
	}
}

// note writes one event of those said on a line of their own: asks and
// their answers, what the agent did on the side, warnings, endings.
func (r *eventRenderer) note(ev berth.Event, d eventData) {
	switch ev.Type {
	case berth.EventPermissionRequested:
		r.line(r.style(ansiBold, fmt.Sprintf("? permission %s requested: %s", d.str("permission", "id"),
			shorten(orDash(d.str("permission", "tool_call", "title")), 80))))
	case berth.EventPermissionResolved:
		r.line(r.style(ansiDim, fmt.Sprintf("  permission %s: %s (by %s)", d.str("permission_id"), orDash(d.str("option_id")), orDash(d.str("decided_by")))))
	case berth.EventElicitationRequested:
		r.line(r.style(ansiBold, fmt.Sprintf("? elicitation %s requested: %s", d.str("elicitation", "id"),
			shorten(orDash(d.str("elicitation", "message")), 80))))
	case berth.EventElicitationResolved:
		r.line(r.style(ansiDim, fmt.Sprintf("  elicitation %s: %s (by %s)", d.str("elicitation_id"), orDash(d.str("action")), orDash(d.str("decided_by")))))
	case berth.EventFileWritten, berth.EventFileRefused, berth.EventTerminalStarted, berth.EventTerminalExited, berth.EventExec:
		r.line(r.style(ansiDim, fmt.Sprintf("  %s %s", ev.Type, summarize(ev))))
	case berth.EventRuntimeWarning:
		r.line("! warning: " + shorten(d.str("reason"), 200))
	case berth.EventAgentFetch:
		r.line(r.style(ansiDim, "  fetching the agent: "+summarize(ev)))
	case berth.EventBudgetExceeded:
		r.line(fmt.Sprintf("! budget reached: %s %s (spent %s); further model calls are refused", d.str("limit"), d.str("max"), d.str("spent")))
	case berth.EventNetworkDenied:
		r.line(r.style(ansiDim, "  network denied: "+summarize(ev)))
	case berth.EventWorkspaceRewound:
		r.line(r.style(ansiBold, "↺ workspace rewound to "+d.str("checkpoint_id")))
	case berth.EventTurnEnded:
		end := "[" + orDash(d.str("stop_reason"))
		if msg := d.str("error", "message"); msg != "" {
			end += ": " + shorten(msg, 200)
		}
		r.line(r.style(ansiDim, end+"]"))
	case berth.EventSessionStopped:
		end := "[session stopped: " + orDash(d.str("stop_reason"))
		if msg := d.str("failure", "message"); msg != "" {
			end += ": " + shorten(msg, 200)
		}
		r.line(end + "]")
	}
}
