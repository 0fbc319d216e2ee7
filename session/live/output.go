package live

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// output is the agent's output as the session takes it in: the window
// of its updates against limits.max_turn_output, its stderr (a tail kept
// for failure messages), the lines of its stdout that are not the
// protocol, and its updates held back until session_started. The
// session's mu guards it, but warnedStdout.
type output struct {
	ls *Session
	w  outputWindow
	// stderrTail is the agent's last lines of stderr.
	stderrTail []string
	// warnedStdout is set once a non-JSON stdout line has been reported.
	warnedStdout atomic.Bool
	// early holds the agent's updates that came before session_started,
	// logged right after it (or before session_stopped).
	early []berth.Event
	// stderrWG counts the stderr reader, which the monitor waits for.
	stderrWG sync.WaitGroup
}

// ReasonOutputTruncated is the runtime_warning reason for output dropped
// past limits.max_turn_output.
const ReasonOutputTruncated = "output_truncated"

// outputWindow counts the agent's output the log recorded in one turn, or
// between two turns, against limits.max_turn_output: its updates, unknown
// notifications, stderr lines and requests (a permission, a file, a
// terminal: what they log). Past the cap the rest of the window's output
// is dropped from the log (and from the turn's text) and its requests are
// refused, while the turn goes on; one runtime_warning, reason
// output_truncated, says how much: right before turn_ended, or, between
// turns, at the first drop. A shim drops the same way ahead of its spool
// and reports what it dropped (shim.Report), so a flood reaches neither
// its disk nor the daemon. The live session's mu guards it.
type outputWindow struct {
	// turnID is the turn the window belongs to, "" between turns.
	turnID string
	// recorded counts the bytes logged; dropped the bytes the daemon did
	// not log, updates how many pieces of output those were, refused the
	// requests among them.
	recorded, dropped, updates, refused int64
	// shim is what the shim reported it did not spool of this window (a
	// later report of the window replaces an earlier one).
	shim shim.Report
	// truncated is set at the first drop: from then on everything is
	// dropped, so that the log has no holes in the middle of the output.
	truncated bool
	// warned says the window's warning is logged; lateWarned that a
	// report of the time between turns, read once this turn had begun,
	// was warned of.
	warned, lateWarned bool
}

// storePage is the page the stores keep large rows in.
const storePage = 4 << 10

// storedSize is, a little over, what an event with n bytes of data costs
// the store: a small row and its index entries; a row over half a page
// takes whole pages (no second one fits beside it, and a large one's
// overflow pages each hold a little less than a page), and its index
// entries. The cap counts it, so that the store grows by no more than the
// cap, whatever the size of the agent's chunks (measured with SQLite:
// BENCHMARKS.md, "A hostile flood").
func storedSize(n int) int64 {
	if n > storePage/2 {
		return int64((n+n/32+storePage-1)&^(storePage-1)) + 1024
	}
	return int64(n) + 256
}

// errOverTurnOutput is the answer to a request of the agent refused past
// limits.max_turn_output (the code a shim refuses with, too).
var errOverTurnOutput = &acp.Error{Code: -32099, Message: "berth: refused, this turn's output is over limits.max_turn_output"}

// admitLocked says whether an event of n bytes of the agent's output
// is logged, and counts it.
func (o *output) admitLocked(n int) bool {
	w, max, size := &o.w, o.ls.h.Limits.MaxTurnOutput, storedSize(n)
	if max <= 0 || (!w.truncated && w.recorded+size <= max) {
		w.recorded += size
		return true
	}
	w.dropped += int64(n)
	w.updates++
	o.truncateLocked()
	return false
}

// admitRequest counts a request of the agent (a line of size bytes)
// against the window: past the cap it is refused, not served (see
// acp.Options.AdmitRequest). Only the ACP reader calls it.
func (o *output) admitRequest(_ string, size int) error {
	ls := o.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if o.admitLocked(size) {
		return nil
	}
	o.w.refused++
	return errOverTurnOutput
}

// truncateLocked marks the window truncated: between turns that is
// warned of at once; in a turn, a staged steer is delivered now (the
// tool-call boundary it waits for may never be seen again).
func (o *output) truncateLocked() {
	ls := o.ls
	w := &o.w
	first := !w.truncated
	w.truncated = true
	if w.turnID == "" {
		o.warnTruncatedLocked()
		return
	}
	if first && ls.turns.cur != nil && ls.queue.steer != nil {
		ls.queue.deliverSteerLocked(ls.turns.cur)
	}
}

// shimReportLocked takes in what the agent's shim did not spool (see
// shim.Report), if the report is the shim's own: a line over the cap is
// warned about as the daemon's reader would have, what the window dropped
// is counted in it. A report of the time between turns read once a turn
// has begun (the daemon was behind the agent) is warned of, and leaves
// the turn's window alone. It reports whether the report was taken.
func (o *output) shimReportLocked(params json.RawMessage) bool {
	ls := o.ls
	var r shim.Report
	token := ls.h.ShimToken(ls.id, ls.box.socket)
	if token == "" || json.Unmarshal(params, &r) != nil || !hmac.Equal([]byte(r.Token), []byte(token)) {
		return false
	}
	if r.OversizedLine > 0 {
		o.oversizedLineLocked(r.OversizedLine)
	}
	if r.DroppedBytes == 0 && r.DroppedLines == 0 {
		return true
	}
	w := &o.w
	if !r.Turn && w.turnID != "" {
		if !w.lateWarned {
			w.lateWarned = true
			o.emitTruncation("", r.DroppedBytes, r.DroppedLines, r.Refused)
		}
		return true
	}
	if r.DroppedBytes > w.shim.DroppedBytes || r.DroppedLines > w.shim.DroppedLines {
		w.shim = r
	}
	o.truncateLocked()
	return true
}

// closeLocked ends the window, with its warning if it dropped
// anything, and begins the one of next ("" between turns).
func (o *output) closeLocked(next string) {
	if o.w.dropped > 0 || o.w.shim.DroppedLines > 0 {
		o.warnTruncatedLocked()
	}
	o.w = outputWindow{turnID: next}
}

// warnTruncatedLocked logs the window's warning, once.
func (o *output) warnTruncatedLocked() {
	w := &o.w
	if w.warned {
		return
	}
	w.warned = true
	o.emitTruncation(w.turnID, w.dropped+w.shim.DroppedBytes, w.updates+w.shim.DroppedLines, w.refused+w.shim.Refused)
}

// emitTruncation logs the output_truncated warning of a window.
func (o *output) emitTruncation(turnID string, dropped, updates, refused int64) {
	ls := o.ls
	max := ls.h.Limits.MaxTurnOutput
	where := "this turn"
	if turnID == "" {
		where = "between turns"
	}
	data := map[string]any{
		"reason": ReasonOutputTruncated,
		"message": fmt.Sprintf("the agent wrote more than limits.max_turn_output (%d bytes) %s: the rest of its output was dropped from the log",
			max, where),
		"max_turn_output": max,
		"dropped_bytes":   dropped,
		"dropped_updates": updates,
	}
	if refused > 0 {
		data["refused_requests"] = refused
	}
	ls.Emit(turnID, berth.EventRuntimeWarning, data)
}

// oversizedLine records, in the session's log, a stdout line the agent
// wrote that was over limits.max_line_bytes and was skipped. Tagged with
// the line's end, so a shim's replay after a restart does not warn again
// once the warning is committed. Only the ACP reader goroutine calls it.
func (o *output) oversizedLine(size int64) {
	ls := o.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	o.oversizedLineLocked(size)
}

// oversizedLineLocked is oversizedLine with mu held: a shim reports the
// lines over the cap it did not spool (see shim.Report).
func (o *output) oversizedLineLocked(size int64) {
	ls := o.ls
	limit := ls.client.MaxLineBytes()
	ls.emitFrom(ls.client.Position(), ls.turns.currentIDLocked(), berth.EventRuntimeWarning, map[string]any{
		"reason": fmt.Sprintf("the agent wrote a line of %d bytes, over the cap of %d bytes (limits.max_line_bytes); it was skipped",
			size, limit),
		"line_bytes": size,
		"max_bytes":  limit,
	})
}

// skippedLine warns, once per agent, that it wrote something other than
// JSON-RPC to stdout (the line is skipped; the transport counts them all).
func (o *output) skippedLine(line []byte) {
	ls := o.ls
	if !o.warnedStdout.CompareAndSwap(false, true) {
		return
	}
	// Tagged with the line's end: a replay after a restart does not warn twice.
	ls.emitFrom(ls.client.Position(), ls.turns.currentID(), berth.EventRuntimeWarning, map[string]string{
		"reason": "the agent wrote a line to stdout that is not JSON-RPC; it was skipped (stdout is the protocol channel)",
		"line":   string(line[:min(len(line), 200)]),
	})
}

// readStderr turns the agent's stderr into agent_stderr events and keeps a
// tail for failure messages.
func (o *output) readStderr(r interface{ Read([]byte) (int, error) }) {
	defer o.stderrWG.Done()
	// Small: stderr is a trickle, and a thousand idle sessions each hold
	// this while they wait for it. A line is made when one comes.
	var buf []byte
	chunk := make([]byte, 4<<10)
	for {
		n, err := r.Read(chunk)
		data := chunk[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				buf = appendCapped(buf, data)
				break
			}
			buf = appendCapped(buf, data[:i])
			o.stderrLine(string(buf))
			buf = buf[:0]
			data = data[i+1:]
		}
		if err != nil {
			if len(buf) > 0 {
				o.stderrLine(string(buf))
			}
			return
		}
	}
}

// stderrLine records one line of the agent's stderr.
func (o *output) stderrLine(line string) {
	ls := o.ls
	line = strings.TrimRight(line, "\r")
	ls.mu.Lock()
	o.stderrTail = append(o.stderrTail, line)
	if len(o.stderrTail) > 20 {
		o.stderrTail = o.stderrTail[len(o.stderrTail)-20:]
	}
	turnID := ""
	if ls.turns.cur != nil {
		turnID = ls.turns.cur.id
	}
	// A line's event data is its JSON: about its length and a little.
	if o.admitLocked(len(line) + len(`{"line":""}`)) {
		ls.Emit(turnID, berth.EventAgentStderr, StderrData{Line: line})
	}
	ls.mu.Unlock()
}

// waitStderr waits for the stderr reader, forcing it closed if something
// the agent left behind still holds the pipe.
func (o *output) waitStderr() {
	ls := o.ls
	done := make(chan struct{})
	go func() { o.stderrWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		if r := ls.proc.Stderr(); r != nil {
			_ = r.Close()
		}
		<-done
	}
}

// emitAgentLocked logs what the agent's line being dispatched said. Before
// session_started (commands an agent announces while it opens the
// conversation) it is held back and logged right after it.
func (o *output) emitAgentLocked(turnID, typ string, data any) {
	ls := o.ls
	if ls.sess.State != berth.StateStarting {
		ls.emitFrom(ls.client.Position(), turnID, typ, data)
		return
	}
	ev := berth.NewEvent(ls.id, turnID, typ, data)
	ev.Source = ls.client.Position()
	o.early = append(o.early, ev)
}

// endHandshakeLocked gives the end of the agent's answer that opened the
// conversation (end) to the handshake's last event: session_started, or
// the last update held back until it, which is logged after it. Once that
// event is committed every line of the handshake is processed, so the
// session's durable offset passes the answer: a reattach does not read it
// again, and the shim's spool may let the handshake's lines go.
func (o *output) endHandshakeLocked(started *berth.Event, end int64) {
	last := started
	if n := len(o.early); n > 0 {
		last = &o.early[n-1]
	}
	last.Source = max(last.Source, end)
}

// flushEarlyLocked logs the agent's updates held back until session_started
// (see agentHandler.SessionUpdate), in arrival order.
func (o *output) flushEarlyLocked() {
	ls := o.ls
	for _, ev := range o.early {
		ls.emitEvent(ev)
	}
	o.early = nil
}

// maxStderrLine caps one stderr line kept in an event.
const maxStderrLine = 4096

func appendCapped(buf, data []byte) []byte {
	if room := maxStderrLine - len(buf); room < len(data) {
		data = data[:max(room, 0)]
	}
	return append(buf, data...)
}

// StderrData is the data of an agent_stderr event.
type StderrData struct {
	Line string `json:"line"`
}
