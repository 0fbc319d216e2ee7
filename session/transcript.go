package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-sh/berth"
)

// transcriptPage is how many events a transcript reads from the store at
// a time.
const transcriptPage = 256

// Transcript implements berth.SessionService: it folds the log into turns.
// The work is linear in the log's size, and stops as soon as ctx ends (a
// client that went away).
func (m *Manager) Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if m.runtimeOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	var b transcriptBuilder
	if err := m.foldLog(ctx, id, berth.EventFilter{}, &b); err != nil {
		return nil, err
	}
	turns := b.finish()
	if turns == nil {
		return []berth.TranscriptTurn{}, nil
	}
	return turns, nil
}

// foldLog folds the session's events that f selects (its After and Limit
// are set here) into b, a page at a time, checking ctx between events.
func (m *Manager) foldLog(ctx context.Context, id string, f berth.EventFilter, b *transcriptBuilder) error {
	f.After, f.Limit = 0, transcriptPage
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		evs, err := m.store.ListEvents(ctx, id, f)
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
		}
		if len(evs) < f.Limit {
			return nil
		}
		f.After = evs[len(evs)-1].Seq
	}
}

// transcriptBuilder folds events into turns. Each turn's text and thoughts
// are kept as the chunks decoded from the log and joined once, into a
// string of their exact size, by finish: appending to a string would copy
// the whole text again for every chunk, and a growing buffer leaves about
// twice the text behind it.
type transcriptBuilder struct {
	turns    []berth.TranscriptTurn
	text     []pieces // per turn, parallel to turns
	thoughts []pieces
	index    map[string]int // turn id → position in turns
	calls    map[string]int // turn id + tool call id → position in the turn's calls
}

// finish returns the turns with their text.
func (b *transcriptBuilder) finish() []berth.TranscriptTurn {
	for i := range b.turns {
		b.turns[i].Text = b.text[i].join()
		b.turns[i].Thoughts = b.thoughts[i].join()
	}
	b.text, b.thoughts = nil, nil
	return b.turns
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
		var d turnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		b.index[ev.TurnID] = len(b.turns)
		b.turns = append(b.turns, berth.TranscriptTurn{TurnID: ev.TurnID, Prompt: d.Text, Content: d.Content, Source: d.Source,
			StartSeq: ev.Seq, ToolCalls: []berth.TranscriptToolUse{}})
		b.text = append(b.text, pieces{})
		b.thoughts = append(b.thoughts, pieces{})
		return
	}
	i, ok := b.index[ev.TurnID]
	if !ok {
		return
	}
	t := &b.turns[i]
	switch ev.Type {
	case berth.EventAgentMessage, berth.EventAgentThought:
		var d textData
		_ = json.Unmarshal(ev.Data, &d)
		if ev.Type == berth.EventAgentMessage {
			b.text[i].add(d.Text)
		} else {
			b.thoughts[i].add(d.Text)
		}
	case berth.EventToolCall, berth.EventToolCallUpdate:
		var d toolCallData
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

// pieces is a text kept as the chunks it came in.
type pieces struct {
	chunks []string
	size   int
}

// add appends a chunk.
func (p *pieces) add(s string) {
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
func (m *Manager) transcriptPreamble(ctx context.Context, id string) (string, error) {
	turns, err := m.Transcript(ctx, id)
	if err != nil || len(turns) == 0 {
		return "", err
	}
	var b strings.Builder
	b.WriteString("[berth: this session was resumed in a new conversation; the conversation so far follows]\n")
	for _, t := range turns {
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
		if t.Text != "" {
			fmt.Fprintf(&b, "Assistant: %s\n", t.Text)
		}
	}
	b.WriteString("[berth: end of the earlier conversation; the new prompt follows]\n")
	return b.String(), nil
}
