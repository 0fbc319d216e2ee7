package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth/acp"
)

// floodAgent answers, on stdin: a session/prompt (id 7) with five output
// lines of about 1 KB, then its answer; a session/prompt whose params say
// "crash" with five output lines and an exit mid-turn; one whose params
// say "requests" with three requests of about 1 KB and an answer to no
// call, then its answer; "between" with five output lines outside any
// turn, a small one and a request, then an exit; "long" with a text chunk
// of 2.5 MB; "big" with a line of 5000 bytes. A refusal it reads goes to
// its stderr.
const floodAgent = `
note() { printf '{"jsonrpc":"2.0","method":"session/update","params":{"n":%d,"x":"%s"}}\n' "$1" "$(head -c 1000 /dev/zero | tr '\0' a)"; }
ask() { printf '{"jsonrpc":"2.0","id":"r%d","method":"fs/read_text_file","params":{"path":"%s"}}\n' "$1" "$(head -c 1000 /dev/zero | tr '\0' p)"; }
while read -r line; do
  case "$line" in
  *refused*) echo "$line" >&2;;
  *session/prompt*crash*) for i in 1 2 3 4 5; do note $i; done; exit 3;;
  *session/prompt*requests*) for i in 1 2 3; do ask $i; done; echo '{"jsonrpc":"2.0","id":999,"result":{}}'
    echo '{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}';;
  *session/prompt*) for i in 1 2 3 4 5; do note $i; done
    echo '{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}';;
  between*) for i in 1 2 3 4 5; do note $i; done; echo '{"jsonrpc":"2.0","method":"session/update","params":{"done":1}}'; echo '{"jsonrpc":"2.0","id":"b1","method":"x/marker"}'; exit 0;;
  long*) printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}\n' "$(head -c 2500000 /dev/zero | tr '\0' a)"; echo '{"jsonrpc":"2.0","method":"after_long"}';;
  big*) head -c 5000 /dev/zero | tr '\0' b; echo; echo '{"jsonrpc":"2.0","method":"after_big"}';;
  esac
done`

// streamLines splits what a daemon read into its lines.
func streamLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// turnLines returns the lines after the (n-1)th line holding answer, up
// to and with the nth.
func turnLines(lines []string, answer string, n int) []string {
	var this []string
	for _, l := range lines {
		this = append(this, l)
		if strings.Contains(l, answer) {
			if n--; n == 0 {
				return this
			}
			this = nil
		}
	}
	return nil
}

// reportsIn returns the shim's reports in a stream, and how many output
// notifications (session/update) it carries.
func reportsIn(t *testing.T, lines []string) (reports []Report, updates int) {
	t.Helper()
	for _, l := range lines {
		var msg struct {
			Method string `json:"method"`
			Params Report `json:"params"`
		}
		if json.Unmarshal([]byte(l), &msg) != nil {
			continue
		}
		switch msg.Method {
		case ReportMethod:
			reports = append(reports, msg.Params)
		case "session/update":
			updates++
		}
	}
	return reports, updates
}

// A turn's output past Config.MaxTurnOutput is not spooled; the shim says
// how much it dropped at the first drop, then, final, right before the
// agent's answer to the prompt, signed with the daemon's token; the next
// turn starts afresh.
func TestTurnOutputPastTheCapIsNotSpooled(t *testing.T) {
	cfg := newConfig(t, floodAgent)
	cfg.MaxTurnOutput, cfg.Token = 2500, "tok"
	h := serve(t, cfg)
	d := h.attach(0)
	answer := `"result":{"stopReason":"end_turn"}`
	for turn := 1; turn <= 2; turn++ {
		d.write(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}` + "\n")
		eventually(t, "the answer", func() bool { return bytes.Count(d.out.Bytes(), []byte(answer)) == turn })
		this := turnLines(streamLines(d.out.Bytes()), answer, turn)
		reports, updates := reportsIn(t, this)
		if updates != 2 {
			t.Errorf("turn %d: %d output lines spooled, want 2 (the cap holds two of ~1060 bytes)", turn, updates)
		}
		if len(reports) != 2 || reports[0].Final || reports[0].DroppedLines != 1 {
			t.Fatalf("turn %d: reports %+v, want the first drop told at once, then the final one", turn, reports)
		}
		last := reports[1]
		if !last.Final || !last.Turn || last.DroppedLines != 3 || last.DroppedBytes < 3000 || last.Token != "tok" {
			t.Fatalf("turn %d: final report %+v, want one for 3 dropped lines signed %q", turn, last, "tok")
		}
		if !strings.Contains(this[len(this)-2], ReportMethod) {
			t.Errorf("turn %d: the final report is not right before the answer: %q", turn, this[len(this)-2:])
		}
	}
	if sz := fileSize(cfg.Spool); sz > 2*(2*1100+1000) {
		t.Errorf("spool is %d bytes: more than the two turns' kept lines", sz)
	}
}

// A request past the cap is not spooled: the shim refuses it itself (the
// agent gets an error answer on its stdin), and an answer to no call of
// the daemon's counts, and is dropped, like output.
func TestRequestsPastTheCapAreRefused(t *testing.T) {
	cfg := newConfig(t, floodAgent)
	cfg.MaxTurnOutput, cfg.Token = 2500, "tok"
	h := serve(t, cfg)
	d := h.attach(0)
	d.write(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"requests":1}}` + "\n")
	out := d.waitOutContains(`"result":{"stopReason":"end_turn"}`)
	if n := bytes.Count(out, []byte("fs/read_text_file")); n != 2 {
		t.Errorf("%d requests reached the daemon, want the 2 the cap holds", n)
	}
	if bytes.Contains(out, []byte(`"id":999`)) {
		t.Error("an answer to no call reached the daemon past the cap")
	}
	reports, _ := reportsIn(t, streamLines(out))
	if last := reports[len(reports)-1]; !last.Final || last.Refused != 1 || last.DroppedLines != 2 {
		t.Fatalf("final report %+v, want 1 refused request and 2 lines dropped", last)
	}
	eventually(t, "the refusal at the agent", func() bool {
		return bytes.Contains(d.errOut.Bytes(), []byte(`"id":"r3"`)) && bytes.Contains(d.errOut.Bytes(), []byte("-32099"))
	})
}

// Between turns the window is capped too and reported at its first drop;
// it stays truncated (a small line after the first drop is dropped, a
// request refused) until a turn begins its own, and its final report comes
// when the stream ends.
func TestOutputBetweenTurnsIsCapped(t *testing.T) {
	cfg := newConfig(t, floodAgent)
	cfg.MaxTurnOutput, cfg.Token = 2500, "tok"
	h := serve(t, cfg)
	d := h.attach(0)
	d.write("between\n")
	lines := streamLines(d.allOut())
	reports, updates := reportsIn(t, lines)
	if updates != 2 {
		t.Errorf("%d output lines spooled between turns, want 2", updates)
	}
	if len(reports) != 2 || reports[0].Turn || reports[0].DroppedLines != 1 {
		t.Fatalf("reports %+v: want the first drop of the time between turns told at once", reports)
	}
	if last := reports[1]; !last.Final || last.Turn || last.DroppedLines != 5 || last.Refused != 1 {
		t.Fatalf("final report %+v, want 5 lines dropped, 1 request refused", last)
	}
	for _, l := range lines {
		if strings.Contains(l, `"done":1`) || strings.Contains(l, "x/marker") {
			t.Errorf("spooled after the first drop: %s", l)
		}
	}
}

// A line over Config.MaxLineBytes is never spooled, whatever the window;
// the daemon is told its length.
func TestOversizedLineIsNeverSpooled(t *testing.T) {
	cfg := newConfig(t, floodAgent)
	cfg.MaxLineBytes = 4000
	h := serve(t, cfg)
	d := h.attach(0)
	d.write("big\n")
	out := d.waitOutContains("after_big")
	if bytes.Contains(out, []byte("bbbb")) {
		t.Fatal("the oversized line reached the daemon")
	}
	reports, _ := reportsIn(t, streamLines(out))
	if len(reports) != 1 || reports[0].OversizedLine != 5000 {
		t.Fatalf("reports %+v, want one oversized line of 5000 bytes", reports)
	}
	if sz := fileSize(cfg.Spool); sz >= 5000 {
		t.Errorf("spool is %d bytes: the oversized line is in it", sz)
	}
}

// An agent that ends in the middle of a turn past the cap still has its
// drops reported, before the stream ends.
func TestDropsReportedWhenTheAgentEndsMidTurn(t *testing.T) {
	cfg := newConfig(t, floodAgent)
	cfg.MaxTurnOutput = 2500
	h := serve(t, cfg)
	d := h.attach(0)
	d.write(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"crash":1}}` + "\n")
	reports, updates := reportsIn(t, streamLines(d.allOut()))
	if updates != 2 {
		t.Errorf("%d output lines spooled, want 2", updates)
	}
	if n := len(reports); n == 0 || !reports[n-1].Final || reports[n-1].DroppedLines != 3 {
		t.Fatalf("reports %+v, want a final one for the 3 lines dropped", reports)
	}
	if st, _ := d.wait(); st.Code != 3 {
		t.Errorf("exit %+v", st)
	}
	d.Release()
}

// A text chunk longer than acp.TextPieceBytes reaches the daemon cut in
// lines of the same update, each at most a piece of it.
func TestLongTextChunkReachesTheDaemonInPieces(t *testing.T) {
	h := serve(t, newConfig(t, floodAgent))
	d := h.attach(0)
	d.write("long\n")
	lines := streamLines(d.waitOutContains("after_long"))
	text := 0
	for _, l := range lines {
		var n struct {
			Params struct {
				Update struct {
					Content struct{ Text string } `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(l), &n) != nil || n.Params.Update.Content.Text == "" {
			continue
		}
		if len(l) > acp.TextPieceBytes+256 {
			t.Fatalf("a line of %d bytes reached the daemon", len(l))
		}
		text += len(n.Params.Update.Content.Text)
	}
	if text != 2500000 {
		t.Fatalf("the pieces carry %d bytes of text, want 2500000", text)
	}
}

// windowAgent writes, on a session/prompt, three output lines; on a call
// x/ping (id 8), its answer and three more; on x/end, the answer to the
// prompt (id 7) and one line between turns. A prompt's window stays open
// until then.
const windowAgent = `
note() { printf '{"jsonrpc":"2.0","method":"session/update","params":{"n":%d}}\n' "$1"; }
while read -r line; do
  case "$line" in
  *session/prompt*) note 1; note 2; note 3;;
  *x/ping*) echo '{"jsonrpc":"2.0","id":8,"result":{}}'; note 4; note 5; note 6;;
  *x/end*) echo '{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}'; note 7;;
  esac
done`

// lineEnds returns the stream offset just past each line of out.
func lineEnds(out []byte) []int64 {
	var ends []int64
	for i, b := range out {
		if b == '\n' {
			ends = append(ends, int64(i+1))
		}
	}
	return ends
}

// windowTurn has the daemon d prompt windowAgent and ping it, and returns
// the stream's line ends (n1 n2 n3, the ping's answer, n4 n5 n6) and the
// length of an output line.
func windowTurn(t *testing.T, d *daemon, last string) (ends []int64, line int64) {
	t.Helper()
	d.write(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}` + "\n")
	d.waitOutContains(`"n":3`)
	d.write(`{"jsonrpc":"2.0","id":8,"method":"x/ping"}` + "\n")
	ends = lineEnds(d.waitOutContains(last))
	return ends, ends[0]
}

// A daemon attaching from an offset in the middle of a window is told how
// much the window kept before that offset, not after it: it reads the rest
// again and counts it itself, so that no byte is counted twice across a
// restart. What the window did not count (the answer to a call of the
// daemon's) is not in it, and a window that began after the offset kept
// nothing before it.
func TestHelloCountsTheWindowBeforeItsFrom(t *testing.T) {
	cfg := newConfig(t, windowAgent)
	cfg.MaxTurnOutput, cfg.Token = 1<<20, "tok"
	h := serve(t, cfg)
	d := h.attach(0)
	ends, line := windowTurn(t, d, `"n":6`)
	if len(ends) != 7 {
		t.Fatalf("stream has %d lines, want 7: %q", len(ends), d.out.Bytes())
	}
	d.Detach()
	for _, c := range []struct {
		from int64
		kept int64
		what string
	}{
		{0, 0, "the stream's start"},
		{ends[1], 2 * line, "after n2"},
		{ends[2], 3 * line, "after n3"},
		{ends[3], 3 * line, "after the ping's answer"},
		{ends[4], 4 * line, "after n4"},
		{ends[6], 6 * line, "the end"},
	} {
		d := h.attach(c.from)
		if hl := d.Hello(); hl.From != c.from || hl.OutputKept != c.kept || hl.OutputTruncated {
			t.Errorf("hello from %s (%d): From %d, kept %d truncated %v; want kept %d", c.what, c.from, hl.From, hl.OutputKept, hl.OutputTruncated, c.kept)
		}
		d.Detach()
	}

	// The turn ends: the window between turns begins at its answer, so it
	// kept nothing before an offset in the turn, or right after the answer.
	d = h.attach(ends[4])
	d.write(`{"jsonrpc":"2.0","method":"x/end"}` + "\n")
	tail := lineEnds(d.waitOutContains(`"n":7`)) // n5 n6, the answer, n7
	d.Detach()
	for _, c := range []struct {
		from, kept int64
	}{{ends[4], 0}, {ends[4] + tail[2], 0}, {ends[4] + tail[3], line}} {
		d := h.attach(c.from)
		if hl := d.Hello(); hl.OutputKept != c.kept {
			t.Errorf("hello from %d, the window between turns beginning at %d: kept %d, want %d", c.from, ends[6], hl.OutputKept, c.kept)
		}
		d.Detach()
	}
}

// A window's truncation is told to a daemon attaching from after its
// first report only: one attaching from before reads the report again.
func TestHelloSaysTruncatedOnlyPastTheFirstReport(t *testing.T) {
	cfg := newConfig(t, windowAgent)
	cfg.Token = "tok"
	// Four output lines fit: n5 is the first dropped, and reported.
	cfg.MaxTurnOutput = int64(len(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`)+1) * 4
	h := serve(t, cfg)
	d := h.attach(0)
	ends, line := windowTurn(t, d, ReportMethod)
	if len(ends) != 6 {
		t.Fatalf("stream has %d lines, want 6 (n1 n2 n3, the answer, n4, the report): %q", len(ends), d.out.Bytes())
	}
	d.Detach()
	d = h.attach(ends[4])
	if hl := d.Hello(); hl.OutputKept != 4*line || hl.OutputTruncated {
		t.Errorf("hello from before the report: kept %d truncated %v, want %d, false", hl.OutputKept, hl.OutputTruncated, 4*line)
	}
	d.Detach()
	d = h.attach(ends[5])
	if hl := d.Hello(); hl.OutputKept != 4*line || !hl.OutputTruncated {
		t.Errorf("hello from after the report: kept %d truncated %v, want %d, true", hl.OutputKept, hl.OutputTruncated, 4*line)
	}
	d.Detach()
}

// A window knows what it kept before any offset from the spool's start
// on, inside a gap or a line too; the gaps a punch leaves behind are let
// go, and what it knows from there on stays the same.
func TestWindowKeptBefore(t *testing.T) {
	w := newWindow("7", 100)
	// Lines of 10 bytes at 100, 110; a gap to 130; lines at 130, 140; a
	// gap to 200; a line at 200.
	for _, at := range []int64{100, 110, 130, 140, 200} {
		w.keep(at, 10)
	}
	want := map[int64]int64{0: 0, 100: 0, 105: 5, 110: 10, 120: 20, 125: 20, 130: 20, 145: 35, 150: 40, 199: 40, 210: 50, 500: 50}
	for o, kept := range want {
		if got := w.keptBefore(o); got != kept {
			t.Errorf("keptBefore(%d) = %d, want %d", o, got, kept)
		}
	}
	w.forget(150)
	if len(w.gaps) != 1 {
		t.Errorf("gaps after forgetting those before 150: %v, want the one from 150 on", w.gaps)
	}
	for o, kept := range want {
		if got := w.keptBefore(o); o >= 150 && got != kept {
			t.Errorf("after forget(150): keptBefore(%d) = %d, want %d", o, got, kept)
		}
	}
}
