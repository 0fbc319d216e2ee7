package session

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// reasonOutputTruncated is the runtime_warning reason for output dropped
// past limits.max_turn_output.
const reasonOutputTruncated = "output_truncated"

// outputWindow counts the agent's output the log recorded in one turn, or
// between two turns, against limits.max_turn_output: its updates, unknown
// notifications and stderr lines. Past the cap the rest of the window's
// output is dropped from the log (and from the turn's text) while the
// turn goes on; one runtime_warning, reason output_truncated, says how
// much: right before turn_ended, or, between turns, at the first drop. A
// shim drops the same way ahead of its spool and reports what it dropped
// (shim.Report), so a flood reaches neither its disk nor the daemon. The
// runtime's mu guards it.
type outputWindow struct {
	// turnID is the turn the window belongs to, "" between turns.
	turnID string
	// recorded counts the bytes logged; dropped the bytes not, updates
	// how many pieces of output those were.
	recorded, dropped, updates int64
	// truncated is set at the first drop: from then on everything is
	// dropped, so that the log has no holes in the middle of the output.
	truncated bool
	// warned says the window's warning is logged.
	warned bool
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
func (rt *runtime) admitOutputLocked(n int) bool {
	w, max, size := &rt.out, rt.m.opts.Limits.MaxTurnOutput, storedSize(n)
	if max <= 0 || (!w.truncated && w.recorded+size <= max) {
		w.recorded += size
		return true
	}
	w.truncated = true
	w.dropped += int64(n)
	w.updates++
	if w.turnID == "" {
		rt.warnTruncatedLocked()
	}
	return false
}

// shimReportLocked takes in what the agent's shim did not spool (see
// shim.Report), if the report is the shim's own: a line over the cap is
// warned about as the daemon's reader would have, dropped output is
// counted in the window. It reports whether the report was taken.
func (rt *runtime) shimReportLocked(params json.RawMessage) bool {
	var r shim.Report
	token := shim.TokenOf(rt.shimSocket)
	if rt.shimSocket == "" || json.Unmarshal(params, &r) != nil || r.Token != token {
		return false
	}
	if r.OversizedLine > 0 {
		rt.oversizedLineLocked(r.OversizedLine)
	}
	if r.DroppedBytes > 0 || r.DroppedLines > 0 {
		w := &rt.out
		w.truncated = true
		w.dropped += r.DroppedBytes
		w.updates += r.DroppedLines
		if w.turnID == "" {
			rt.warnTruncatedLocked()
		}
	}
	return true
}

// closeOutputLocked ends the window, with its warning if it dropped
// anything, and begins the one of next ("" between turns).
func (rt *runtime) closeOutputLocked(next string) {
	if rt.out.dropped > 0 {
		rt.warnTruncatedLocked()
	}
	rt.out = outputWindow{turnID: next}
}

// warnTruncatedLocked logs the window's warning, once.
func (rt *runtime) warnTruncatedLocked() {
	w := &rt.out
	if w.warned {
		return
	}
	w.warned = true
	max := rt.m.opts.Limits.MaxTurnOutput
	where := "this turn"
	if w.turnID == "" {
		where = "between turns"
	}
	rt.emit(w.turnID, berth.EventRuntimeWarning, map[string]any{
		"reason": reasonOutputTruncated,
		"message": fmt.Sprintf("the agent wrote more than limits.max_turn_output (%d bytes) %s: the rest of its output was dropped from the log",
			max, where),
		"max_turn_output": max,
		"dropped_bytes":   w.dropped,
		"dropped_updates": w.updates,
	})
}

// clipText is s up to max bytes, cut on a character's start.
func clipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
