package acp

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// dataOf is a ClientHandler that turns each update into event data the
// way berth does (TextJSON), counting what that allocated.
type dataOf struct {
	updates
	dmu   sync.Mutex
	data  [][]byte
	alloc []uint64
}

func (d *dataOf) SessionUpdate(n SessionNotification, u Update) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := u.TextJSON(`{"text":`, `}`)
	runtime.ReadMemStats(&after)
	d.dmu.Lock()
	d.data = append(d.data, b)
	d.alloc = append(d.alloc, after.TotalAlloc-before.TotalAlloc)
	d.dmu.Unlock()
}

// chunkLine is a session/update line carrying text as a JSON literal.
func chunkLine(literal string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` +
		literal + `}}}}`
}

// A text chunk's event data is its text as the agent wrote it, never
// decoded and encoded again; a long line's own buffer holds it, so the
// text is not even copied.
func TestTextChunkBecomesDataWithoutCopies(t *testing.T) {
	h := &dataOf{}
	_, p := newPair(t, clientDispatch{h}, Options{})
	long := `"` + strings.Repeat(`a\"b\u00e9`, 1<<18) + `"` // 3 MiB: read into a buffer of its own
	short := `"short \u263a"`
	p.send(t, chunkLine(long))
	p.send(t, chunkLine(short))
	waitFor(t, func() bool { h.dmu.Lock(); defer h.dmu.Unlock(); return len(h.data) == 2 })
	for i, lit := range []string{long, short} {
		if got, want := string(h.data[i]), `{"text":`+lit+`}`; got != want {
			t.Fatalf("data %d = %.80q…, want %.80q…", i, got, want)
		}
		var d struct{ Text string }
		if err := json.Unmarshal(h.data[i], &d); err != nil || !strings.HasPrefix(d.Text, []string{`a"bé`, "short ☺"}[i]) {
			t.Fatalf("data %d does not decode: %v", i, err)
		}
	}
	if h.alloc[0] > 64<<10 {
		t.Fatalf("the long chunk's data allocated %d bytes: it was copied", h.alloc[0])
	}
}

// What the fast path cannot store as it is goes through the decoder.
func TestTextChunkScanFallsBack(t *testing.T) {
	for name, params := range map[string]string{
		"not utf-8":     `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + "\xff" + `"}}}`,
		"escaped key":   `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","t\u0065xt":"x"}}}`,
		"image":         `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"x"}}}`,
		"tool call":     `{"sessionId":"s","update":{"sessionUpdate":"tool_call","content":{"type":"text","text":"x"}}}`,
		"invalid json":  `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"n":01}`,
		"text a number": `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":1}}}`,
	} {
		if _, _, _, ok := scanTextChunk([]byte(params)); ok {
			t.Errorf("%s: taken by the fast path", name)
		}
	}
	sid, kind, raw, ok := scanTextChunk([]byte(`{ "update" : {"content":{"text":"hi","type":"text"}, "sessionUpdate":"agent_thought_chunk"}, "sessionId":"s1" }`))
	if !ok || sid != "s1" || kind != UpdateAgentThoughtChunk || string(raw) != `"hi"` {
		t.Fatalf("scan = %q %q %q %v", sid, kind, raw, ok)
	}
}
