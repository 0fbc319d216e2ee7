package shim

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"

	"github.com/berth-sh/berth/acp"
)

// ledger keeps the JSON-RPC requests in flight both ways, so that a daemon
// attaching after a restart learns which of the agent's requests no daemon
// answered (they are served again) and which of its own the agent has not
// answered (a prompt in flight). It learns from the agent's stdout lines
// (sawAgent) and the daemon's stdin lines (sawDaemon), and forgets an
// answered call once a daemon has durably processed its answer (forget).
// It is not safe for concurrent use: the server's mu guards it.
type ledger struct {
	// requests are the agent's requests no daemon has answered, by id.
	requests map[string]Request
	// calls are the daemon's requests, by id, until a daemon has their answer.
	calls map[string]*Call
	// lastID is the highest numeric request id a daemon has sent.
	lastID int64
}

// newLedger returns an empty ledger.
func newLedger() *ledger {
	return &ledger{requests: map[string]Request{}, calls: map[string]*Call{}}
}

// sawAgent records a line of the agent's stdout classify kept: a request
// waits for the daemon's answer, an answer marks the daemon's call
// answered at the line's end.
func (l *ledger) sawAgent(li lineInfo) {
	switch li.kind {
	case acp.KindRequest:
		l.requests[li.id] = Request{End: li.end, Line: li.line}
	case acp.KindResponse:
		// Kept until a daemon has the answer durably (see forget).
		if c := l.calls[li.id]; c != nil {
			c.AnsweredAt = li.end
		}
	}
}

// sawDaemon records the lines of a stdin frame the daemon sends the
// agent, before the agent can see them: a request is a call in flight, an
// answer settles the agent's request. It returns the id of the last
// session/prompt among them, if any.
func (l *ledger) sawDaemon(payload []byte) (prompt string) {
	for rest := payload; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		kind, id, method := acp.Classify(line)
		switch kind {
		case acp.KindRequest:
			l.calls[string(id)] = &Call{ID: bytes.Clone(id), Method: method}
			if method == acp.MethodSessionPrompt {
				prompt = string(id)
			}
			if n, err := strconv.ParseInt(string(id), 10, 64); err == nil && n > l.lastID {
				l.lastID = n
			}
		case acp.KindResponse:
			delete(l.requests, string(id))
		}
	}
	return prompt
}

// pending reports whether id is a call of the daemon's the agent has not
// answered yet.
func (l *ledger) pending(id string) bool {
	c := l.calls[id]
	return c != nil && c.AnsweredAt == 0
}

// forget drops the calls answered before offset: a daemon has durably
// processed everything there.
func (l *ledger) forget(offset int64) {
	for id, c := range l.calls {
		if c.AnsweredAt > 0 && c.AnsweredAt <= offset {
			delete(l.calls, id)
		}
	}
}

// fill puts the ledger in a hello: the agent's requests in the order it
// sent them, the daemon's calls by id, and the last id.
func (l *ledger) fill(h *Hello) {
	for _, r := range l.requests {
		h.Requests = append(h.Requests, r)
	}
	sort.Slice(h.Requests, func(i, j int) bool { return h.Requests[i].End < h.Requests[j].End })
	for _, c := range l.calls {
		h.Calls = append(h.Calls, *c)
	}
	sort.Slice(h.Calls, func(i, j int) bool { return string(h.Calls[i].ID) < string(h.Calls[j].ID) })
	h.LastID = l.lastID
}

// lineInfo is what the shim keeps of a line it watched.
type lineInfo struct {
	kind acp.Kind
	id   string
	end  int64
	line json.RawMessage
}

// idKey is how a JSON-RPC id member begins on the wire.
var idKey = []byte(`"id"`)

// classify says whether a stdout line is a request or an answer, with
// its id. A line without "id" anywhere is neither (a notification, the
// bulk of a stream) and is not scanned further. (An id key spelled with
// \u escapes is not seen.)
func classify(line []byte) (acp.Kind, []byte) {
	if !bytes.Contains(line, idKey) {
		return acp.KindOther, nil
	}
	kind, id, _ := acp.Classify(line)
	return kind, id
}

// infoOf is what the ledger keeps of a line of kind with id ending at
// stream offset end: a request keeps a copy of its line. ok is false for a
// line that is neither a request nor an answer.
func infoOf(kind acp.Kind, id, line []byte, end int64) (li lineInfo, ok bool) {
	switch kind {
	case acp.KindRequest:
		return lineInfo{kind: kind, id: string(id), end: end, line: bytes.Clone(bytes.TrimSpace(line))}, true
	case acp.KindResponse:
		return lineInfo{kind: kind, id: string(id), end: end}, true
	}
	return lineInfo{}, false
}
