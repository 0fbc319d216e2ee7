package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// transcripts read sessions' logs a turn at a time: the transcript, a
// turn's result once it is over, the preamble an agent that could not
// reopen its conversation is given, and a session's last words.
type transcripts struct {
	m *Manager
}

// transcriptPage is how many events a transcript reads from the store at
// a time.
const transcriptPage = 256

// Transcript implements berth.SessionService: it folds the log into turns.
// The work is linear in the log's size, and stops as soon as ctx ends (a
// client that went away).
func (m *Manager) Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error) {
	turns := []berth.TranscriptTurn{}
	err := m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		turns = append(turns, *t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return turns, nil
}

// TranscriptEach implements berth.TranscriptStreamer: the turns are folded
// from the log and handed to fn one at a time, each once the next begins
// (or the log ends), so that only one is ever held.
func (m *Manager) TranscriptEach(ctx context.Context, id string, fn func(*berth.TranscriptTurn) error) error {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return err
	}
	if m.set.liveOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return err
		}
	}
	b := transcriptBuilder{emit: fn, long: func(turnID string) berth.LongText { return m.transcripts.turnText(id, turnID) }}
	if err := m.transcripts.foldLog(ctx, id, berth.EventFilter{}, &b); err != nil {
		return err
	}
	return b.flush()
}

// foldLog folds the session's events that f selects (its After, Limit and
// MaxBytes are set here) into b, a page at a time, checking ctx between
// events; it stops at b's first error.
func (tr *transcripts) foldLog(ctx context.Context, id string, f berth.EventFilter, b *transcriptBuilder) error {
	f.After, f.Limit, f.MaxBytes = 0, transcriptPage, berth.EventPageBytes
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		evs, err := tr.m.store.ListEvents(ctx, id, f)
		if err != nil {
			return err
		}
		for i := range evs {
			if i%64 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			b.add(&evs[i])
			if b.err != nil {
				return b.err
			}
			// What add kept is its own: the raw event goes now, not with
			// the page.
			evs[i].Data = nil
		}
		if len(evs) == 0 {
			return nil
		}
		f.After = evs[len(evs)-1].Seq
	}
}

// transcriptBuilder folds events into turns. A turn's text is kept as the
// bodies of the JSON strings it was logged in, up to maxTurnText, and
// decoded once at the end; a longer one is not kept at all but read again
// from the log as it is written (berth.LongText, from long). Its thoughts
// are kept decoded, up to berth.MaxTranscriptThoughts, and joined once
// into a string of their exact size. With emit set, a turn goes to emit as
// soon as the next begins, and is forgotten; without it, finish returns
// them all.
type transcriptBuilder struct {
	emit func(*berth.TranscriptTurn) error
	// long reads the text of a turn from the log.
	long func(turnID string) berth.LongText
	err  error
	// turns are the turns not yet emitted; text and thoughts parallel it.
	turns    []berth.TranscriptTurn
	text     []bodies
	thoughts []pieces
	index    map[string]int // turn id → position in turns
	calls    map[string]int // turn id + tool call id → position in the turn's calls
}

// bodies is a turn's text as the bodies of the JSON strings it was logged
// in, up to maxTurnText escaped; spilled once it went past.
type bodies struct {
	parts   [][]byte
	size    int
	spilled bool
}

// add appends a body, or lets go of them all once they are past
// maxTurnText.
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
			out.WriteString(decodeBody(p))
		}
	}
	return out.String()
}

// finish returns the turns with their text, for a builder without emit.
func (b *transcriptBuilder) finish() []berth.TranscriptTurn {
	for i := range b.turns {
		b.complete(i)
	}
	b.text, b.thoughts = nil, nil
	return b.turns
}

// complete gives turn i its text and thoughts: a text up to maxTurnText
// decoded, as every reader takes it; a longer one to read again.
func (b *transcriptBuilder) complete(i int) {
	if b.text[i].spilled {
		b.turns[i].Long = b.long(b.turns[i].TurnID)
	} else {
		b.turns[i].Text = b.text[i].text()
	}
	b.turns[i].Thoughts = b.thoughts[i].join()
}

// flush emits the turns held.
func (b *transcriptBuilder) flush() error {
	for i := range b.turns {
		if b.err != nil {
			break
		}
		b.complete(i)
		b.err = b.emit(&b.turns[i])
		b.turns[i] = berth.TranscriptTurn{}
	}
	b.turns, b.text, b.thoughts = b.turns[:0], b.text[:0], b.thoughts[:0]
	clear(b.index)
	clear(b.calls)
	return b.err
}

// add folds one event in.
func (b *transcriptBuilder) add(ev *berth.Event) {
	if ev.TurnID == "" {
		return
	}
	if b.index == nil {
		b.index, b.calls = map[string]int{}, map[string]int{}
	}
	if ev.Type == berth.EventTurnStarted {
		if b.emit != nil && b.flush() != nil {
			return
		}
		var d live.TurnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		b.index[ev.TurnID] = len(b.turns)
		b.turns = append(b.turns, berth.TranscriptTurn{TurnID: ev.TurnID, Prompt: d.Text, Content: d.Content, Source: d.Source,
			StartSeq: ev.Seq, ToolCalls: []berth.TranscriptToolUse{}})
		b.text = append(b.text, bodies{})
		b.thoughts = append(b.thoughts, pieces{max: berth.MaxTranscriptThoughts})
		return
	}
	i, ok := b.index[ev.TurnID]
	if !ok {
		return
	}
	t := &b.turns[i]
	switch ev.Type {
	case berth.EventAgentMessage:
		if body := textBody(ev.Data); len(body) > 0 {
			b.text[i].add(body)
		}
	case berth.EventAgentThought:
		var d live.TextData
		_ = json.Unmarshal(ev.Data, &d)
		b.thoughts[i].add(d.Text)
	case berth.EventToolCall, berth.EventToolCallUpdate:
		var d live.ToolCallData
		_ = json.Unmarshal(ev.Data, &d)
		key := ev.TurnID + "\x00" + d.ToolCallID
		j, seen := b.calls[key]
		if !seen {
			b.calls[key] = len(t.ToolCalls)
			t.ToolCalls = append(t.ToolCalls, berth.TranscriptToolUse{ToolCallID: d.ToolCallID})
			j = len(t.ToolCalls) - 1
		}
		c := &t.ToolCalls[j]
		if d.Title != "" {
			c.Title = d.Title
		}
		if d.Kind != "" {
			c.Kind = d.Kind
		}
		if d.Status != "" {
			c.Status = d.Status
		}
	case berth.EventUsage:
		t.Usage = ev.Data
	case berth.EventTurnEnded:
		var d struct {
			StopReason string          `json:"stop_reason"`
			Error      json.RawMessage `json:"error"`
			Usage      json.RawMessage `json:"usage"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		t.StopReason, t.EndSeq = d.StopReason, ev.Seq
		if len(d.Error) > 0 && string(d.Error) != "null" {
			t.Error = d.Error
		}
		if len(d.Usage) > 0 && string(d.Usage) != "null" {
			t.Usage = d.Usage
		}
	}
}

// turnText reads the agent's message of one turn from the log, a page at
// a time, handing each piece over as the body of a JSON string.
func (tr *transcripts) turnText(id, turnID string) berth.LongText {
	return func(ctx context.Context, each func([]byte) error) error {
		f := berth.EventFilter{Type: berth.EventAgentMessage, TurnID: turnID, Limit: transcriptPage, MaxBytes: berth.EventPageBytes}
		for {
			evs, err := tr.m.store.ListEvents(ctx, id, f)
			if err != nil || len(evs) == 0 {
				return err
			}
			for i := range evs {
				if body := textBody(evs[i].Data); len(body) > 0 {
					if err := each(body); err != nil {
						return err
					}
				}
			}
			f.After = evs[len(evs)-1].Seq
		}
	}
}

// decodeBody decodes the body of a JSON string: one without escapes is
// its own text.
func decodeBody(body []byte) string {
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, body...), '"'), &s) != nil {
		return ""
	}
	return s
}

// textBody is the text of an agent_message's data as the body of a JSON
// string: the logged bytes themselves when the data is {"text":"…"}, else
// the decoded text escaped again. Empty for no text.
func textBody(data json.RawMessage) json.RawMessage {
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

// pieces is a text kept as the chunks it came in, up to max bytes (0: no
// bound).
type pieces struct {
	chunks []string
	size   int
	max    int
}

// add appends a chunk, or as much of it as max leaves room for.
func (p *pieces) add(s string) {
	if p.max > 0 && p.size+len(s) > p.max {
		// Cut on a character's start, so no character is cut in half.
		n := max(0, p.max-p.size)
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if s != "" {
		p.chunks = append(p.chunks, s)
		p.size += len(s)
	}
}

// join returns the text, built in one buffer of its exact size.
func (p *pieces) join() string {
	if len(p.chunks) == 1 {
		return p.chunks[0]
	}
	var b strings.Builder
	b.Grow(p.size)
	for _, c := range p.chunks {
		b.WriteString(c)
	}
	return b.String()
}

// transcriptPreamble renders a session's conversation so far for an agent
// that has to start it over: it goes before the first prompt of the new
// conversation. "" when there was none.
func (tr *transcripts) transcriptPreamble(ctx context.Context, id string) (string, error) {
	var p preamble
	err := tr.m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		turn, err := renderTurn(ctx, t, maxPreambleTurn)
		p.add(turn)
		return err
	})
	if err != nil {
		return "", err
	}
	return p.String("[berth: this session was resumed in a new conversation; the conversation so far follows]\n"), nil
}

// preamble is an earlier conversation rendered for an agent that has to
// start it over, bounded (maxPreamble): the newest turns are what the
// agent needs most, so the oldest go once the whole is past its bound.
type preamble struct {
	turns []string
	size  int
}

// add appends a rendered turn.
func (p *preamble) add(turn string) {
	p.turns, p.size = append(p.turns, turn), p.size+len(turn)
	for p.size > maxPreamble && len(p.turns) > 1 {
		p.size -= len(p.turns[0])
		p.turns = p.turns[1:]
	}
}

// String is the preamble under its first line head; "" when there was no
// turn.
func (p *preamble) String(head string) string {
	if len(p.turns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(head)
	for _, t := range p.turns {
		b.WriteString(t)
	}
	b.WriteString("[berth: end of the earlier conversation; the new prompt follows]\n")
	return b.String()
}

// maxPreamble bounds the earlier conversation a new one is given, and
// maxPreambleTurn each turn's text in it: an agent's context is far
// smaller, and a flooding turn's text is tens of MB.
const (
	maxPreamble     = 2 << 20
	maxPreambleTurn = 256 << 10
)

// renderTurn renders one turn for a preamble, its text up to max bytes.
func renderTurn(ctx context.Context, t *berth.TranscriptTurn, max int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "User: %s\n", t.Prompt)
	for _, c := range t.Content {
		// What was attached is named; its bytes are not sent again.
		if c.Type != berth.ContentText {
			fmt.Fprintf(&b, "User attached: %s\n", attachmentLine(&c))
		}
	}
	for _, c := range t.ToolCalls {
		fmt.Fprintf(&b, "Tool call (%s, %s): %s\n", c.Kind, c.Status, c.Title)
	}
	text := clipText(t.Text, max)
	if t.Long != nil {
		var err error
		if text, err = t.Long.Head(ctx, max); err != nil {
			return "", err
		}
	}
	if text != "" {
		fmt.Fprintf(&b, "Assistant: %s\n", text)
	}
	return b.String(), nil
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
