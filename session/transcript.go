package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-sh/berth"
)

// Transcript implements berth.SessionService: it folds the log into turns.
func (m *Manager) Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error) {
	if m.runtimeOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	var b transcriptBuilder
	after := int64(0)
	for {
		evs, err := m.store.ListEvents(ctx, id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit})
		if err != nil {
			return nil, err
		}
		for i := range evs {
			b.add(&evs[i])
		}
		if len(evs) < berth.MaxEventLimit {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	if b.turns == nil {
		return []berth.TranscriptTurn{}, nil
	}
	return b.turns, nil
}

// transcriptBuilder folds events into turns.
type transcriptBuilder struct {
	turns []berth.TranscriptTurn
	index map[string]int // turn id → position in turns
	calls map[string]int // turn id + tool call id → position in the turn's calls
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
		b.turns = append(b.turns, berth.TranscriptTurn{TurnID: ev.TurnID, Prompt: d.Text, Source: d.Source,
			StartSeq: ev.Seq, ToolCalls: []berth.TranscriptToolUse{}})
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
			t.Text += d.Text
		} else {
			t.Thoughts += d.Text
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
