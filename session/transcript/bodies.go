package transcript

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// bodies is a turn's text as the bodies of the JSON strings it was logged
// in, up to live.MaxTurnText escaped; spilled once it went past.
type bodies struct {
	parts   [][]byte
	size    int
	spilled bool
}

// add appends a body, or lets go of them all once they are past
// live.MaxTurnText.
func (t *bodies) add(b []byte) {
	if t.spilled {
		return
	}
	if t.size += len(b); t.size > live.MaxTurnText {
		t.parts, t.spilled = nil, true
		return
	}
	// A copy: a page's events may share one buffer, which this would keep.
	t.parts = append(t.parts, bytes.Clone(b))
}

// text decodes what was kept.
func (t *bodies) text() string {
	var out strings.Builder
	out.Grow(t.size)
	for _, p := range t.parts {
		if bytes.IndexByte(p, '\\') < 0 {
			out.Write(p)
		} else {
			out.WriteString(berth.DecodeStringBody(p))
		}
	}
	return out.String()
}

// TextBody is the text of an agent_message's data as the body of a JSON
// string: the logged bytes themselves when the data is {"text":"…"}, else
// the decoded text escaped again. Empty for no text.
func TextBody(data json.RawMessage) json.RawMessage {
	if len(data) > len(live.TextPrefix)+len(live.TextSuffix) && string(data[:len(live.TextPrefix)]) == live.TextPrefix &&
		string(data[len(data)-len(live.TextSuffix):]) == live.TextSuffix {
		if body := data[len(live.TextPrefix) : len(data)-len(live.TextSuffix)]; berth.IsStringBody(body) {
			// Kept in the event's own buffer: the fold lets go of the rest.
			return body
		}
	}
	var d live.TextData
	if json.Unmarshal(data, &d) != nil || d.Text == "" {
		return nil
	}
	lit, _ := json.Marshal(d.Text)
	return lit[1 : len(lit)-1]
}
