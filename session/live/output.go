package live

import (
	"crypto/hmac"
	"encoding/json"
	"fmt"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

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

// admitOutputLocked says whether an event of n bytes of the agent's output
// is logged, and counts it.
func (ls *Session) admitOutputLocked(n int) bool {
	w, max, size := &ls.out, ls.h.Limits.MaxTurnOutput, storedSize(n)
	if max <= 0 || (!w.truncated && w.recorded+size <= max) {
		w.recorded += size
		return true
	}
	w.dropped += int64(n)
	w.updates++
	ls.truncateLocked()
	return false
}

// errOverTurnOutput is the answer to a request of the agent refused past
// limits.max_turn_output (the code a shim refuses with, too).
var errOverTurnOutput = &acp.Error{Code: -32099, Message: "berth: refused, this turn's output is over limits.max_turn_output"}

// admitRequest counts a request of the agent (a line of size bytes)
// against the window: past the cap it is refused, not served (see
// acp.Options.AdmitRequest). Only the ACP reader calls it.
func (ls *Session) admitRequest(_ string, size int) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.admitOutputLocked(size) {
		return nil
	}
	ls.out.refused++
	return errOverTurnOutput
}

// truncateLocked marks the window truncated: between turns that is
// warned of at once; in a turn, a staged steer is delivered now (the
// tool-call boundary it waits for may never be seen again).
func (ls *Session) truncateLocked() {
	w := &ls.out
	first := !w.truncated
	w.truncated = true
	if w.turnID == "" {
		ls.warnTruncatedLocked()
		return
	}
	if first && ls.turn != nil && ls.steer != nil {
		ls.deliverSteerLocked(ls.turn)
	}
}

// shimReportLocked takes in what the agent's shim did not spool (see
// shim.Report), if the report is the shim's own: a line over the cap is
// warned about as the daemon's reader would have, what the window dropped
// is counted in it. A report of the time between turns read once a turn
// has begun (the daemon was behind the agent) is warned of, and leaves
// the turn's window alone. It reports whether the report was taken.
func (ls *Session) shimReportLocked(params json.RawMessage) bool {
	var r shim.Report
	token := ls.h.ShimToken(ls.id, ls.shimSocket)
	if token == "" || json.Unmarshal(params, &r) != nil || !hmac.Equal([]byte(r.Token), []byte(token)) {
		return false
	}
	if r.OversizedLine > 0 {
		ls.oversizedLineLocked(r.OversizedLine)
	}
	if r.DroppedBytes == 0 && r.DroppedLines == 0 {
		return true
	}
	w := &ls.out
	if !r.Turn && w.turnID != "" {
		if !w.lateWarned {
			w.lateWarned = true
			ls.emitTruncation("", r.DroppedBytes, r.DroppedLines, r.Refused)
		}
		return true
	}
	if r.DroppedBytes > w.shim.DroppedBytes || r.DroppedLines > w.shim.DroppedLines {
		w.shim = r
	}
	ls.truncateLocked()
	return true
}

// closeOutputLocked ends the window, with its warning if it dropped
// anything, and begins the one of next ("" between turns).
func (ls *Session) closeOutputLocked(next string) {
	if ls.out.dropped > 0 || ls.out.shim.DroppedLines > 0 {
		ls.warnTruncatedLocked()
	}
	ls.out = outputWindow{turnID: next}
}

// warnTruncatedLocked logs the window's warning, once.
func (ls *Session) warnTruncatedLocked() {
	w := &ls.out
	if w.warned {
		return
	}
	w.warned = true
	ls.emitTruncation(w.turnID, w.dropped+w.shim.DroppedBytes, w.updates+w.shim.DroppedLines, w.refused+w.shim.Refused)
}

// emitTruncation logs the output_truncated warning of a window.
func (ls *Session) emitTruncation(turnID string, dropped, updates, refused int64) {
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
