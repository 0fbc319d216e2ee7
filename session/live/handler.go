package live

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// agentHandler serves one agent's calls into berth.
type agentHandler struct {
	ls *Session
	// replaying is set while session/load replays history, whose updates
	// are already in the log.
	replaying atomic.Bool
}

var _ acp.ClientHandler = (*agentHandler)(nil)

// TextData is the data of agent_message, agent_thought and user_message.
type TextData struct {
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content,omitempty"`
}

// ToolCallData is the data of tool_call and tool_call_update.
type ToolCallData struct {
	ToolCallID string          `json:"tool_call_id"`
	Title      string          `json:"title,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Status     string          `json:"status,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Raw        json.RawMessage `json:"raw"`
}

// rawData is the data of events that keep the agent's update as it came.
type rawData struct {
	Raw json.RawMessage `json:"raw"`
}

// SessionUpdate maps one ACP update to one event, in arrival order. The
// event is tagged with the turn in flight, if any.
func (h *agentHandler) SessionUpdate(n acp.SessionNotification, u acp.Update) {
	ls := h.ls
	// What the agent offers is kept current, from a replay too.
	ctl := controlUpdateOf(&u)
	if ctl != nil {
		ls.mu.Lock()
		ls.controls.applyLocked(ctl)
		ls.unlock()
	}
	if h.replaying.Load() {
		return
	}
	typ, data := updateEvent(&u)
	if ctl != nil && ctl.data != nil {
		data, _ = json.Marshal(ctl.data)
	}
	ls.mu.Lock()
	keep := ls.out.admitLocked(len(data))
	if ls.turns.cur != nil {
		ls.turns.cur.heardLocked()
	}
	if keep && ls.turns.cur != nil && u.Kind == acp.UpdateAgentMessageChunk {
		ls.turns.cur.addChunk(&u)
	}
	ls.mu.Unlock()
	if !keep {
		return
	}
	for _, piece := range eventPieces(&u, typ, data) {
		// A session past its budget of bytes in flight waits here, before
		// it takes the live session's lock: the agent is held back, the API is not.
		if err := ls.h.Log.WaitRoom(context.Background(), ls.id, len(piece)); err != nil {
			ls.logger.Debug("wait for room in the log", "err", err)
		}
		ls.mu.Lock()
		ls.out.emitAgentLocked(ls.turns.currentIDLocked(), typ, piece)
		ls.mu.Unlock()
	}
	ls.mu.Lock()
	if ls.turns.cur != nil && ls.queue.steer != nil && toolCallFinished(&u) {
		ls.queue.deliverSteerLocked(ls.turns.cur)
	}
	ls.mu.Unlock()
}

// toolCallFinished reports whether an update ends a tool call: the
// boundary at which a staged steer is delivered.
func toolCallFinished(u *acp.Update) bool {
	return (u.Kind == acp.UpdateToolCall || u.Kind == acp.UpdateToolCallUpdate) &&
		(u.Status == "completed" || u.Status == "failed")
}

// updateEvent returns the event type and data for an update.
func updateEvent(u *acp.Update) (string, json.RawMessage) {
	typ, v := updateData(u)
	if raw, ok := v.(json.RawMessage); ok {
		return typ, raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Every value updateData returns marshals: this is a bug.
		panic("session: update event data: " + err.Error())
	}
	return typ, b
}

// updateData returns the event type and data (to marshal, or already
// JSON) for an update.
func updateData(u *acp.Update) (string, any) {
	switch u.Kind {
	case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateUserMessageChunk:
		typ := berth.EventAgentMessage
		if u.Kind == acp.UpdateAgentThoughtChunk {
			typ = berth.EventAgentThought
		} else if u.Kind == acp.UpdateUserMessageChunk {
			typ = berth.EventUserMessage
		}
		// The text as the agent wrote it becomes the data: never decoded
		// or encoded again, and copied at most once.
		if data := u.TextJSON(`{"text":`, `}`); data != nil {
			return typ, json.RawMessage(data)
		}
		d := TextData{Text: u.Text()}
		if d.Text == "" && len(u.Content) > 0 {
			d.Content = u.Content
		}
		return typ, d
	case acp.UpdateToolCall:
		return berth.EventToolCall, ToolCallData{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.ToolKind,
			Status: u.Status, Raw: u.Raw}
	case acp.UpdateToolCallUpdate:
		return berth.EventToolCallUpdate, ToolCallData{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.ToolKind,
			Status: u.Status, Content: u.Content, Raw: u.Raw}
	case acp.UpdatePlan:
		entries := u.Entries
		if len(entries) == 0 {
			entries = json.RawMessage(`[]`)
		}
		return berth.EventPlan, map[string]json.RawMessage{"entries": entries}
	case acp.UpdateUsage:
		return berth.EventUsage, map[string]json.RawMessage{"used": orNull(u.Used), "size": orNull(u.Size), "cost": orNull(u.Cost)}
	case acp.UpdateCurrentMode:
		return berth.EventModeUpdate, rawData{Raw: u.Raw}
	case acp.UpdateConfigOption:
		return berth.EventConfigUpdate, rawData{Raw: u.Raw}
	case acp.UpdateAvailableCommands:
		return berth.EventCommandsUpdate, rawData{Raw: u.Raw}
	}
	return berth.EventACPUnknown, rawData{Raw: u.Raw}
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// ExtNotification keeps notifications berth does not know as acp_unknown,
// but for the reports of the agent's shim (see shim.Report).
func (h *agentHandler) ExtNotification(method string, params json.RawMessage) {
	ls := h.ls
	if method == shim.ReportMethod {
		ls.mu.Lock()
		taken := ls.out.shimReportLocked(params)
		ls.mu.Unlock()
		if taken {
			return
		}
	}
	// Made outside the lock: the agent's params may be tens of MB.
	raw, _ := json.Marshal(map[string]any{"method": method, "params": orNull(params)})
	ls.mu.Lock()
	keep := ls.out.admitLocked(len(raw))
	ls.mu.Unlock()
	if !keep {
		return
	}
	if err := ls.h.Log.WaitRoom(context.Background(), ls.id, len(raw)); err != nil {
		ls.logger.Debug("wait for room in the log", "err", err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.out.emitAgentLocked(ls.turns.currentIDLocked(), berth.EventACPUnknown, rawData{Raw: raw})
}
