package shim

// The output window: what of the agent's output the spool keeps per turn.
//
// A hostile or broken agent can write gigabytes in one turn. The daemon
// records at most limits.max_turn_output of it per turn; the shim keeps no
// more than that in its spool either, so a daemon that is away (or slow)
// never finds a spool of gigabytes. The shim sees the daemon's
// session/prompt go to the agent and the agent's answer come back: that
// span is a turn's window, and the time between two turns a window too.
// In a window, every line of the agent counts against the cap but the
// answers to the daemon's own calls (which the daemon bounds): its
// notifications (message chunks, tool calls, plans, anything else), its
// requests (a permission, a file, a terminal) and answers to nothing.
// Past the cap the rest of the window is not spooled: notifications and
// stray answers are dropped, and requests are refused by the shim itself
// (the agent gets an error answer and goes on). The daemon learns what
// was dropped from report lines the shim writes into the stream (Report).

import (
	"encoding/json"
	"time"
)

// ReportMethod is the JSON-RPC method of the notification a shim writes
// into the agent's stdout stream to tell the daemon what it did not spool.
const ReportMethod = "_berth/shim_report"

// reportEvery is how often a window that drops is reported while it goes
// on: the daemon sees the agent busy (it is), and knows where it stands.
const reportEvery = time.Second

// Report is the params of a ReportMethod notification. Token is the one
// the daemon gave the shim (Config.Token): the agent, which writes the
// rest of the stream, does not know it, so a report it forges is not
// taken for the shim's.
type Report struct {
	Token string `json:"token"`
	// OversizedLine is the length of a line over Config.MaxLineBytes that
	// was not spooled (the daemon would have skipped it).
	OversizedLine int64 `json:"oversized_line,omitempty"`
	// DroppedBytes and DroppedLines are what the window has not spooled so
	// far, all of it (a later report of the same window replaces an
	// earlier one); Refused counts the requests among them. Turn says the
	// window is a turn's rather than the time between turns; Final that
	// it is over (a turn's comes right before the agent's answer to its
	// prompt, or the end of the stream).
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	DroppedLines int64 `json:"dropped_lines,omitempty"`
	Refused      int64 `json:"refused,omitempty"`
	Turn         bool  `json:"turn,omitempty"`
	Final        bool  `json:"final,omitempty"`
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

// refusalCode is the JSON-RPC error code of a request the shim refuses
// (the implementation-defined server error range).
const refusalCode = -32099

// refusalLine is the answer the agent gets to a request refused past the
// cap.
func refusalLine(id []byte) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{refusalCode, "berth: refused, this turn's output is over limits.max_turn_output"}})
	return append(b, '\n')
}

// window counts the output of one turn, or of the time between two, that
// the spool kept, against the cap. The server's mu guards it.
type window struct {
	// prompt is the id of the daemon's session/prompt the window belongs
	// to, "" between turns.
	prompt string
	// kept and dropped are bytes kept and not; lines how many were not,
	// refused the requests among them.
	kept, dropped, lines, refused int64
	// truncated is set at the first drop: the rest of the window is
	// dropped, small lines too, so the log never has holes in the middle.
	truncated bool
	// reported is when the window's drops were last reported (zero:
	// never).
	reported time.Time
}

// admit says whether a line of n bytes is kept, counting it. max <= 0
// keeps everything.
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

// report is the window's report, final or not.
func (w *window) report(token string, final bool) Report {
	return Report{Token: token, DroppedBytes: w.dropped, DroppedLines: w.lines, Refused: w.refused,
		Turn: w.prompt != "", Final: final}
}

// due says whether a window that drops is to be reported now: at its
// first drop, then every reportEvery.
func (w *window) due(now time.Time) bool {
	return w.dropped > 0 && (w.reported.IsZero() || now.Sub(w.reported) >= reportEvery)
}
