package demoagent

import (
	"slices"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// selectOf returns the select option id of opts, or nil.
func selectOf(opts []acp.SessionConfigOption, id string) *acp.SessionConfigOptionSelect {
	for _, o := range opts {
		if o.Select != nil && string(o.Select.Id) == id {
			return o.Select
		}
	}
	return nil
}

func TestControlsOfferedSetAndKeptAcrossLoad(t *testing.T) {
	dir := t.TempDir()
	h1 := start(t, "--state-dir", dir)
	h1.initialize()
	resp, err := h1.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: h1.root, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	sid := resp.SessionId
	if resp.Modes == nil || resp.Modes.CurrentModeId != modeDefault || len(resp.Modes.AvailableModes) != 2 {
		t.Fatalf("modes = %+v", resp.Modes)
	}
	m := selectOf(resp.ConfigOptions, optModel)
	if m == nil || m.Category == nil || *m.Category != acp.SessionConfigOptionCategoryModel || m.CurrentValue != modelSmall {
		t.Fatalf("model option = %+v", m)
	}
	if v := selectOf(resp.ConfigOptions, optVerbosity); v == nil || v.CurrentValue != verbosityLow || len(*v.Options.Ungrouped) != 2 {
		t.Fatalf("verbosity option = %+v", v)
	}
	var cmds []string
	for _, u := range h1.client.allUpdates(sid) {
		if u.AvailableCommandsUpdate != nil {
			for _, c := range u.AvailableCommandsUpdate.AvailableCommands {
				cmds = append(cmds, c.Name)
			}
		}
	}
	if !slices.Equal(cmds, []string{"echo", "plan"}) {
		t.Fatalf("commands = %v", cmds)
	}

	if _, err := h1.conn.SetSessionMode(ctxT(t), acp.SetSessionModeRequest{SessionId: sid, ModeId: modePlan}); err != nil {
		t.Fatal(err)
	}
	set, err := h1.conn.SetSessionConfigOption(ctxT(t), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: sid, ConfigId: optVerbosity, Value: verbosityHigh}})
	if err != nil || selectOf(set.ConfigOptions, optVerbosity).CurrentValue != verbosityHigh {
		t.Fatalf("set verbosity = %+v, %v", set, err)
	}
	_, err = h1.conn.SetSessionConfigOption(ctxT(t), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: sid, ConfigId: optModel, Value: "gpt-9"}})
	wantCode(t, err, -32602)
	h1.mustPrompt(sid, "write f.txt x\nrun echo hi\nmode\nconfig", acp.StopReasonEndTurn)
	if got := h1.messages(sid); got != "refused in plan mode: write\nrefused in plan mode: run\nmode: plan\nconfig: model=demo-small verbosity=high" {
		t.Fatalf("messages = %q", got)
	}
	h1.stop()

	// A fresh agent on the same state dir answers session/load with them.
	h2 := start(t, "--state-dir", dir)
	h2.initialize()
	load, err := h2.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: h2.root, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if load.Modes == nil || load.Modes.CurrentModeId != modePlan || selectOf(load.ConfigOptions, optVerbosity).CurrentValue != verbosityHigh {
		t.Fatalf("load answered %+v", load)
	}
}

func TestNoControlsOffersNone(t *testing.T) {
	h := start(t, "--no-controls")
	h.initialize()
	resp, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Modes != nil || resp.ConfigOptions != nil || len(h.client.allUpdates(resp.SessionId)) != 0 {
		t.Fatalf("--no-controls offered %+v", resp)
	}
	_, err = h.conn.SetSessionMode(ctxT(t), acp.SetSessionModeRequest{SessionId: resp.SessionId, ModeId: modePlan})
	wantCode(t, err, -32601)
}
