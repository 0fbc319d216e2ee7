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
	"slices"
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
//
// It also knows where in the stream what it kept lies, so that a hello
// can say how much of it is before the offset a daemon attaches from
// (keptBefore): the daemon reads the rest again and counts it itself, and
// a byte is never counted twice across a restart.
type window struct {
	// prompt is the id of the daemon's session/prompt the window belongs
	// to, "" between turns.
	prompt string
	// kept is the bytes the spool kept of the window's counted lines (a
	// long text chunk's pieces as spooled); dropped the bytes of the lines
	// it did not keep, lines how many those were, refused the requests
	// among them.
	kept, dropped, lines, refused int64
	// from is the stream offset the window begins at; last is just past
	// its last kept line. Between them, the spooled bytes the window did
	// not count (its reports, answers to the daemon's calls, another
	// window's line that was being spooled as this one began) are gaps.
	from, last int64
	gaps       []span
	// truncated is set at the first drop: the rest of the window is
	// dropped, small lines too, so the log never has holes in the middle.
	// cut is the stream offset just past the report of that first drop.
	truncated bool
	cut       int64
	// reported is when the window's drops were last reported (zero:
	// never).
	reported time.Time
}

// span is the stream's bytes from start up to end.
type span struct{ start, end int64 }

// newWindow is a window of the turn whose prompt has id prompt ("" for
// the time between turns), beginning at stream offset at.
func newWindow(prompt string, at int64) window {
	return window{prompt: prompt, from: at, last: at}
}

// admit says whether a line of n bytes is kept, counting it if not (a
// kept line is counted by keep, once spooled where it goes). max <= 0
// keeps everything.
func (w *window) admit(n int64, max int64) bool {
	if max <= 0 || (!w.truncated && w.kept+n <= max) {
		return true
	}
	w.truncated = true
	w.dropped += n
	w.lines++
	return false
}

// keep counts a kept line whose size bytes go in the stream at offset at.
func (w *window) keep(at, size int64) {
	if at > w.last {
		w.gaps = append(w.gaps, span{w.last, at})
	}
	w.kept += size
	w.last = at + size
}

// keptBefore is how much of what the window kept lies before stream
// offset o: a daemon attaching from o reads the rest.
func (w *window) keptBefore(o int64) int64 {
	if o >= w.last {
		return w.kept
	}
	if o <= w.from {
		return 0
	}
	// What lies from o to last, less the gaps in it, was kept after o.
	after := w.last - o
	for _, g := range w.gaps {
		if g.end > o {
			after -= g.end - max(g.start, o)
		}
	}
	return w.kept - after
}

// truncatedBefore says whether the window's first drop was reported
// before stream offset o: a daemon attaching from o does not read it.
func (w *window) truncatedBefore(o int64) bool {
	return w.cut > 0 && w.cut <= o
}

// forget lets go of the gaps before stream offset o: no daemon attaches
// from before it any more.
func (w *window) forget(o int64) {
	i := 0
	for i < len(w.gaps) && w.gaps[i].end <= o {
		i++
	}
	w.gaps = slices.Delete(w.gaps, 0, i)
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
