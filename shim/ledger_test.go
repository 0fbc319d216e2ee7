package shim

import (
	"encoding/json"
	"testing"

	"github.com/berth-sh/berth/acp"
)

// agentLine classifies one agent stdout line ending at end and records it.
func agentLine(t *testing.T, l *ledger, line string, end int64) {
	t.Helper()
	li, ok := classifyAt([]byte(line), end)
	if !ok {
		t.Fatalf("classify(%s) kept nothing", line)
	}
	l.sawAgent(li)
}

// classifyAt is what the ledger keeps of a line ending at end.
func classifyAt(line []byte, end int64) (lineInfo, bool) {
	kind, id := classify(line)
	return infoOf(kind, id, line, end)
}

// TestLedgerDaemonCalls: a call the daemon sends is in flight until the
// agent answers it, and stays (answered) until a daemon has processed the
// answer durably; the last numeric id only grows.
func TestLedgerDaemonCalls(t *testing.T) {
	l := newLedger()
	l.sawDaemon([]byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":"x","method":"session/cancel"}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"initialize"}`))
	var h Hello
	l.fill(&h)
	if h.LastID != 7 {
		t.Errorf("LastID = %d, want 7 (a lower or non-numeric id never lowers it)", h.LastID)
	}
	if len(h.Calls) != 3 || string(h.Calls[0].ID) != `"x"` || string(h.Calls[1].ID) != "3" || h.Calls[2].Method != acp.MethodSessionPrompt {
		t.Fatalf("calls = %+v", h.Calls)
	}

	agentLine(t, l, `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`, 100)
	l.forget(99)
	h = Hello{}
	l.fill(&h)
	if c := h.Calls[2]; string(c.ID) != "7" || c.AnsweredAt != 100 {
		t.Fatalf("the answered prompt = %+v, want answered at 100 and kept", c)
	}
	l.forget(100)
	h = Hello{}
	l.fill(&h)
	if len(h.Calls) != 2 {
		t.Fatalf("calls after forget(100) = %+v, want the two unanswered ones", h.Calls)
	}
	for _, c := range h.Calls {
		if string(c.ID) == "7" {
			t.Errorf("the prompt answered at 100 is still kept")
		}
	}
}

// TestLedgerAgentRequests: the agent's requests wait, in the order it sent
// them, until the daemon's answer goes out; notifications are not kept.
func TestLedgerAgentRequests(t *testing.T) {
	l := newLedger()
	if _, ok := classifyAt([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"id"}}`), 10); ok {
		t.Fatal("a notification was kept")
	}
	agentLine(t, l, `{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{}}  `, 50)
	agentLine(t, l, `{"jsonrpc":"2.0","id":"f1","method":"fs/read_text_file","params":{}}`, 120)
	agentLine(t, l, `{"jsonrpc":"2.0","id":"t1","method":"terminal/create","params":{}}`, 80)
	// An answer to a call the daemon never made changes nothing.
	agentLine(t, l, `{"jsonrpc":"2.0","id":99,"result":{}}`, 130)

	l.sawDaemon([]byte(`{"jsonrpc":"2.0","id":"t1","result":{"terminalId":"x"}}` + "\n"))
	var h Hello
	l.fill(&h)
	if len(h.Calls) != 0 {
		t.Errorf("calls = %+v, want none", h.Calls)
	}
	if len(h.Requests) != 2 || h.Requests[0].End != 50 || h.Requests[1].End != 120 {
		t.Fatalf("requests = %+v, want p1 (50) then f1 (120)", h.Requests)
	}
	var first struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(h.Requests[0].Line, &first); err != nil || first.ID != "p1" {
		t.Errorf("first request line = %s (%v), want p1's", h.Requests[0].Line, err)
	}
	if string(h.Requests[0].Line[len(h.Requests[0].Line)-1:]) != "}" {
		t.Errorf("a request's line is kept trimmed: %q", h.Requests[0].Line)
	}
}
