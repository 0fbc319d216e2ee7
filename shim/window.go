package shim

// The output window: what of the agent's output the spool keeps per turn.
//
// A hostile or broken agent can write gigabytes in one turn. The daemon
// records at most limits.max_turn_output of it per turn; the shim keeps no
// more than that in its spool either, so a daemon that is away (or slow)
// never finds a spool of gigabytes. The shim sees the daemon's
// session/prompt go to the agent and the agent's answer come back: that
// span is a turn's window, and the time between two turns a window too.
// In a window, the agent's lines that are neither a request nor an answer
// (its notifications: message chunks, tool calls, plans, anything else)
// are output; past the cap, the rest of the window's output is not
// spooled. The daemon learns what was dropped from a report line the shim
// writes into the stream (see Report).

import (
	"encoding/json"
)

// ReportMethod is the JSON-RPC method of the notification a shim writes
// into the agent's stdout stream to tell the daemon what it did not spool.
const ReportMethod = "_berth/shim_report"

// Report is the params of a ReportMethod notification. Token is the
// shim's nonce (TokenOf its socket): the agent, which writes the rest of
// the stream, does not know it, so a report it forges is not taken for
// the shim's.
type Report struct {
	Token string `json:"token"`
	// OversizedLine is the length of a line over Config.MaxLineBytes that
	// was not spooled (the daemon would have skipped it).
	OversizedLine int64 `json:"oversized_line,omitempty"`
	// DroppedBytes and DroppedLines are the output of the window that was
	// not spooled: a turn's, reported right before the agent's answer to
	// its prompt (or before the stream ends), or the time between turns,
	// reported at its first drop.
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	DroppedLines int64 `json:"dropped_lines,omitempty"`
}

// reportLine is the stream line carrying r.
func reportLine(r Report) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  Report `json:"params"`
	}{"2.0", ReportMethod, r})
	return append(b, '\n')
}

// window counts the output of one turn, or of the time between two, that
// the spool kept, against the cap. The server's mu guards it.
type window struct {
	// prompt is the id of the daemon's session/prompt the window belongs
	// to, "" between turns.
	prompt string
	// kept and dropped are bytes of output kept and not; lines how many
	// were not.
	kept, dropped, lines int64
	// truncated is set at the first drop: the rest of the window is
	// dropped, small lines too, so the log never has holes in the middle.
	truncated bool
	// reported says the drops of a window between turns were reported.
	reported bool
}

// admit says whether a line of output of n bytes is kept, counting it.
// max <= 0 keeps everything.
func (w *window) admit(n int64, max int64) bool {
	if max <= 0 || (!w.truncated && w.kept+n <= max) {
		w.kept += n
		return true
	}
	w.truncated = true
	w.dropped += n
	w.lines++
	return false
}
