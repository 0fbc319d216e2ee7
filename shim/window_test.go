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
