package live

import (
	"encoding/json"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// A turn's end keeps to ACP's stop reasons: one an agent made up becomes
// error (unknown_stop_reason) with the agent's word kept, and an agent
// error's data (often the real cause) is kept in the turn's error.
func TestTurnEndKeepsToACPAndKeepsTheCause(t *testing.T) {
	for _, known := range []string{berth.TurnEndTurn, berth.TurnCancelled, berth.TurnMaxTokens, berth.TurnMaxTurnRequests, berth.TurnRefusal} {
		if end := turnEnd(acp.PromptResponse{StopReason: known}, nil, false); end.StopReason != known || end.Error != nil {
			t.Errorf("%s: %+v", known, end)
		}
	}
	end := turnEnd(acp.PromptResponse{StopReason: "tool_use"}, nil, false)
	if end.StopReason != berth.TurnError || end.Error == nil || end.Error.Code != "unknown_stop_reason" || end.Error.StopReason != "tool_use" {
		t.Errorf("a made-up stop reason: %+v %+v", end, end.Error)
	}
	data := json.RawMessage(`{"cause":"Connection error"}`)
	for code, want := range map[int]string{-32603: "agent_error", acp.CodeAuthRequired: "auth_required"} {
		end = turnEnd(acp.PromptResponse{}, &acp.Error{Code: code, Message: "Internal error", Data: data}, false)
		if end.StopReason != berth.TurnError || end.Error == nil || end.Error.Code != want || string(end.Error.Data) != string(data) {
			t.Errorf("error %d: %+v %+v", code, end, end.Error)
		}
	}
}
