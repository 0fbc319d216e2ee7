package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// agentHandler serves one agent's calls into berth.
type agentHandler struct {
	rt *runtime
	// replaying is set while session/load replays history, whose updates
	// are already in the log.
	replaying bool
}

var _ acp.ClientHandler = (*agentHandler)(nil)

// textData is the data of agent_message, agent_thought and user_message.
type textData struct {
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content,omitempty"`
}

// toolCallData is the data of tool_call and tool_call_update.
type toolCallData struct {
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
	if h.replaying {
		return
	}
	rt := h.rt
	typ, data := updateEvent(&u)
	rt.mu.Lock()
	turnID := ""
	if t := rt.turn; t != nil {
		turnID = t.id
		if u.Kind == acp.UpdateAgentMessageChunk {
			t.addText(data.(textData).Text)
		}
	}
	rt.emit(turnID, typ, data)
	rt.mu.Unlock()
}

// updateEvent returns the event type and data for an update.
func updateEvent(u *acp.Update) (string, any) {
	switch u.Kind {
	case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateUserMessageChunk:
		d := textData{Text: u.Text()}
		if d.Text == "" && len(u.Content) > 0 {
			d.Content = u.Content
		}
		typ := berth.EventAgentMessage
		if u.Kind == acp.UpdateAgentThoughtChunk {
			typ = berth.EventAgentThought
		} else if u.Kind == acp.UpdateUserMessageChunk {
			typ = berth.EventUserMessage
		}
		return typ, d
	case acp.UpdateToolCall:
		return berth.EventToolCall, toolCallData{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.ToolKind,
			Status: u.Status, Raw: u.Raw}
	case acp.UpdateToolCallUpdate:
		return berth.EventToolCallUpdate, toolCallData{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.ToolKind,
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

// ExtNotification keeps notifications berth does not know as acp_unknown.
func (h *agentHandler) ExtNotification(method string, params json.RawMessage) {
	raw, _ := json.Marshal(map[string]any{"method": method, "params": orNull(params)})
	rt := h.rt
	rt.mu.Lock()
	turnID := ""
	if rt.turn != nil {
		turnID = rt.turn.id
	}
	rt.emit(turnID, berth.EventACPUnknown, rawData{Raw: raw})
	rt.mu.Unlock()
}

// readKinds are the ACP tool kinds approve-reads allows.
var readKinds = map[string]bool{"read": true, "search": true, "think": true}

// RequestPermission answers by the session's policy; every request and its
// resolution are logged.
func (h *agentHandler) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	rt := h.rt
	rt.mu.Lock()
	mode := rt.sess.PermissionMode
	cancelled := rt.turn != nil && rt.turn.cancelRequested
	turnID := rt.currentTurnIDLocked()
	rt.mu.Unlock()

	now := time.Now().UTC()
	p := berth.Permission{ID: ids.New("perm"), SessionID: rt.id, TurnID: turnID, ToolCall: req.ToolCall,
		State: berth.PermissionPending, CreatedAt: now}
	for _, o := range req.Options {
		p.Options = append(p.Options, berth.PermissionOption{ID: o.OptionID, Name: o.Name, Kind: o.Kind})
	}
	if len(p.ToolCall) == 0 {
		p.ToolCall = json.RawMessage(`{}`)
	}
	rt.emit(turnID, berth.EventPermissionRequested, map[string]any{"permission": p})

	resolved := map[string]any{"permission_id": p.ID}
	if cancelled {
		resolved["decided_by"] = berth.DecidedByCancel
		rt.emit(turnID, berth.EventPermissionResolved, resolved)
		return acp.Cancelled(), nil
	}
	allow := mode == berth.PermApproveAll || (mode == berth.PermApproveReads && readKinds[req.ToolCallKind()])
	opt := pickOption(req.Options, allow)
	resolved["decided_by"] = berth.DecidedByPolicy
	if opt == "" {
		rt.emit(turnID, berth.EventPermissionResolved, resolved)
		return acp.Cancelled(), nil
	}
	resolved["option_id"] = opt
	rt.emit(turnID, berth.EventPermissionResolved, resolved)
	return acp.Selected(opt), nil
}

// pickOption returns the id of the option a policy decision selects: a
// one-time choice before a permanent one.
func pickOption(opts []acp.PermissionOption, allow bool) string {
	order := []string{"reject_once", "reject_always"}
	if allow {
		order = []string{"allow_once", "allow_always"}
	}
	for _, kind := range order {
		for _, o := range opts {
			if o.Kind == kind {
				return o.OptionID
			}
		}
	}
	return ""
}

func (rt *runtime) currentTurnIDLocked() string {
	if rt.turn == nil {
		return ""
	}
	return rt.turn.id
}
