package acp

import (
	"context"
	"encoding/json"
)

// Method names of the agent's session controls (docs/api.md, "Agent
// controls").
const (
	MethodSetMode         = "session/set_mode"
	MethodSetConfigOption = "session/set_config_option"
	// MethodSetModel is the older unstable way to pick a model, used only
	// for an agent that offers no config option of category model.
	MethodSetModel = "session/set_model"
)

// SessionSetup is what session/new, session/load and session/resume answer
// about the session's controls, kept raw: berth decodes it where it
// builds the Session (session/controls.go).
type SessionSetup struct {
	Modes         json.RawMessage `json:"modes,omitempty"`
	Models        json.RawMessage `json:"models,omitempty"`
	ConfigOptions json.RawMessage `json:"configOptions,omitempty"`
}

// setModeRequest is session/set_mode's params.
type setModeRequest struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
}

// setModelRequest is session/set_model's params.
type setModelRequest struct {
	SessionID string `json:"sessionId"`
	ModelID   string `json:"modelId"`
}

// setConfigRequest is session/set_config_option's params; Type is
// "boolean" for a boolean value and absent for a value id.
type setConfigRequest struct {
	SessionID string          `json:"sessionId"`
	ConfigID  string          `json:"configId"`
	Type      string          `json:"type,omitempty"`
	Value     json.RawMessage `json:"value"`
}

// SetConfigOptionResponse carries every config option with its value after
// a change.
type SetConfigOptionResponse struct {
	ConfigOptions json.RawMessage `json:"configOptions"`
}

// SetMode switches the session's mode.
func (c *Client) SetMode(ctx context.Context, sessionID, modeID string) error {
	return c.conn.Call(ctx, MethodSetMode, setModeRequest{SessionID: sessionID, ModeID: modeID}, nil)
}

// SetModel picks the session's model with the unstable session/set_model.
func (c *Client) SetModel(ctx context.Context, sessionID, modelID string) error {
	return c.conn.Call(ctx, MethodSetModel, setModelRequest{SessionID: sessionID, ModelID: modelID}, nil)
}

// SetConfigOption sets one config option to value (a JSON string for a
// select option, a JSON boolean for a boolean one) and returns the agent's
// options after the change.
func (c *Client) SetConfigOption(ctx context.Context, sessionID, configID string, value json.RawMessage) (SetConfigOptionResponse, error) {
	req := setConfigRequest{SessionID: sessionID, ConfigID: configID, Value: value}
	if v := string(value); v == "true" || v == "false" {
		req.Type = "boolean"
	}
	var resp SetConfigOptionResponse
	err := c.conn.Call(ctx, MethodSetConfigOption, req, &resp)
	return resp, err
}

// LoadSessionSetup is LoadSession that also returns what the agent answered
// about the session's controls.
func (c *Client) LoadSessionSetup(ctx context.Context, sessionID, cwd string, mcp []McpServer) (SessionSetup, error) {
	var resp SessionSetup
	err := c.conn.Call(ctx, MethodSessionLoad, LoadSessionRequest{SessionID: sessionID, Cwd: cwd, McpServers: orEmpty(mcp)}, &resp)
	return resp, err
}

// ResumeSessionSetup is ResumeSession that also returns what the agent
// answered about the session's controls.
func (c *Client) ResumeSessionSetup(ctx context.Context, sessionID, cwd string, mcp []McpServer) (SessionSetup, error) {
	var resp SessionSetup
	err := c.conn.Call(ctx, MethodSessionResume, LoadSessionRequest{SessionID: sessionID, Cwd: cwd, McpServers: orEmpty(mcp)}, &resp)
	return resp, err
}
