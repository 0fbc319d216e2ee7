// Package transcript folds a session's events into the turns of its
// transcript (berth.TranscriptTurn) and renders them as the preamble an
// agent that has to start a conversation over is given. It is pure: the
// session manager reads the log and hands the events in (session,
// transcript.go).
package transcript

import (
	"encoding/json"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// Builder folds events into turns. A turn's text is kept as the bodies of
// the JSON strings it was logged in, up to live.MaxTurnText, and decoded
// once at the end; a longer one is not kept at all but read again from the
// log as it is written (berth.LongText, from Long). Its thoughts are kept
// decoded, up to berth.MaxTranscriptThoughts, and joined once into a
// string of their exact size. With Emit set, a turn goes to Emit as soon
// as the next begins, and is forgotten; without it, Finish returns them
// all. The zero Builder is ready to use; it is not safe for concurrent use.
type Builder struct {
	// Emit, when set, is handed each turn once the next begins (Flush:
	// the rest); its first error stops the fold.
	Emit func(*berth.TranscriptTurn) error
	// Long reads the text of a turn from the log.
	Long func(turnID string) berth.LongText
	err  error
	// turns are the turns not yet emitted; text and thoughts parallel it.
	turns    []berth.TranscriptTurn
	text     []bodies
	thoughts []pieces
	index    map[string]int // turn id → position in turns
	calls    map[string]int // turn id + tool call id → position in the turn's calls
}

// Finish returns the turns with their text, for a builder without Emit.
func (b *Builder) Finish() []berth.TranscriptTurn {
	for i := range b.turns {
		b.complete(i)
	}
	b.text, b.thoughts = nil, nil
	return b.turns
}

// complete gives turn i its text and thoughts: a text up to
// live.MaxTurnText decoded, as every reader takes it; a longer one to read
// again.
func (b *Builder) complete(i int) {
	if b.text[i].spilled {
		b.turns[i].Long = b.Long(b.turns[i].TurnID)
	} else {
		b.turns[i].Text = b.text[i].text()
	}
	b.turns[i].Thoughts = b.thoughts[i].join()
}

// Flush emits the turns held, and returns Emit's first error.
func (b *Builder) Flush() error {
	for i := range b.turns {
		if b.err != nil {
			break
		}
		b.complete(i)
		b.err = b.Emit(&b.turns[i])
		b.turns[i] = berth.TranscriptTurn{}
	}
	b.turns, b.text, b.thoughts = b.turns[:0], b.text[:0], b.thoughts[:0]
	clear(b.index)
	clear(b.calls)
	return b.err
}

// Add folds one event in, and returns Emit's first error: the fold stops
// there.
func (b *Builder) Add(ev *berth.Event) error {
	b.add(ev)
	return b.err
}

// add folds one event in.
func (b *Builder) add(ev *berth.Event) {
	if ev.TurnID == "" {
		return
	}
	if b.index == nil {
		b.index, b.calls = map[string]int{}, map[string]int{}
	}
	if ev.Type == berth.EventTurnStarted {
		if b.Emit != nil && b.Flush() != nil {
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
		if body := TextBody(ev.Data); len(body) > 0 {
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
