package demoagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// The demo agent's controls (docs/api.md, "Agent controls"): modes default and
// plan (plan refuses write and run), a config option model of category model
// (demo-small, demo-large), a select option verbosity (low, high), and the
// slash commands /echo and /plan. A session's values are recorded in its
// history, so session/load brings them back. With --no-controls it offers none
// of them.
//
//	mode               "mode: ID"
//	model              "model: ID"
//	config             "config: model=ID verbosity=V"
//	/echo TEXT         TEXT
//	/plan              switches to plan mode (current_mode_update), "mode: plan"

// Mode, model and verbosity ids.
const (
	modeDefault   = "default"
	modePlan      = "plan"
	modelSmall    = "demo-small"
	modelLarge    = "demo-large"
	optModel      = "model"
	optVerbosity  = "verbosity"
	verbosityLow  = "low"
	verbosityHigh = "high"
	recControls   = "controls" // a history record of the session's controls
)

// controls are one session's current values.
type controls struct {
	mode, model, verbosity string
}

// defaultControls are a new session's values.
var defaultControls = controls{mode: modeDefault, model: modelSmall, verbosity: verbosityLow}

func init() {
	commands["mode"] = func(t *turn, _ string) error { return t.say("mode: " + t.s.getControls().mode) }
	commands["model"] = func(t *turn, _ string) error { return t.say("model: " + t.s.getControls().model) }
	commands["config"] = func(t *turn, _ string) error {
		c := t.s.getControls()
		return t.say(fmt.Sprintf("config: %s=%s %s=%s", optModel, c.model, optVerbosity, c.verbosity))
	}
	commands["/echo"] = (*turn).say
	commands["/plan"] = (*turn).planMode
}

func (s *session) getControls() controls {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctl == (controls{}) {
		return defaultControls
	}
	return s.ctl
}

// setControls changes the session's values and records them.
func (s *session) setControls(a *agent, change func(*controls)) controls {
	s.mu.Lock()
	if s.ctl == (controls{}) {
		s.ctl = defaultControls
	}
	change(&s.ctl)
	c := s.ctl
	s.mu.Unlock()
	if err := s.log.append(record{Type: recControls, Mode: c.mode, Model: c.model, Verbosity: c.verbosity}); err != nil {
		fmt.Fprintf(a.stderr, "agent-demo: history of %s: %v\n", s.id, err)
	}
	return c
}

// restoreControls takes a history record of controls back.
func (s *session) restoreControls(r record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctl = controls{mode: r.Mode, model: r.Model, verbosity: r.Verbosity}
}

// refusedInPlan reports whether a command is refused in the current mode.
func (t *turn) refusedInPlan(word string) bool {
	return (word == "write" || word == "run") && t.s.getControls().mode == modePlan
}

// planMode switches the session to plan mode, as the agent's own choice.
func (t *turn) planMode(string) error {
	t.s.setControls(t.a, func(c *controls) { c.mode = modePlan })
	if err := t.update(acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: modePlan}}); err != nil {
		return err
	}
	return t.say("mode: " + modePlan)
}

// modeState is the session's SessionModeState, nil without controls.
func (a *agent) modeState(c controls) *acp.SessionModeState {
	if a.noControls {
		return nil
	}
	desc := "refuses write and run"
	return &acp.SessionModeState{CurrentModeId: acp.SessionModeId(c.mode), AvailableModes: []acp.SessionMode{
		{Id: modeDefault, Name: "Default"},
		{Id: modePlan, Name: "Plan", Description: &desc},
	}}
}

// configOptions are the session's config options, nil without controls.
func (a *agent) configOptions(c controls) []acp.SessionConfigOption {
	if a.noControls {
		return nil
	}
	model := acp.SessionConfigOptionCategoryModel
	sel := func(id, name string, cat *acp.SessionConfigOptionCategory, cur string, values ...[2]string) acp.SessionConfigOption {
		var opts acp.SessionConfigSelectOptionsUngrouped
		for _, v := range values {
			opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(v[0]), Name: v[1]})
		}
		return acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{Id: acp.SessionConfigId(id), Name: name,
			Category: cat, CurrentValue: acp.SessionConfigValueId(cur), Type: "select",
			Options: acp.SessionConfigSelectOptions{Ungrouped: &opts}}}
	}
	return []acp.SessionConfigOption{
		sel(optModel, "Model", &model, c.model, [2]string{modelSmall, "Demo small"}, [2]string{modelLarge, "Demo large"}),
		sel(optVerbosity, "Verbosity", nil, c.verbosity, [2]string{verbosityLow, "Low"}, [2]string{verbosityHigh, "High"}),
	}
}

// sendCommands sends the session's available_commands_update.
func (a *agent) sendCommands(ctx context.Context, sid string) error {
	if a.noControls {
		return nil
	}
	return a.update(ctx, sid, acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{
		AvailableCommands: []acp.AvailableCommand{
			{Name: "echo", Description: "Say the text back", Input: &acp.AvailableCommandInput{
				Unstructured: &acp.UnstructuredCommandInput{Hint: "text to echo"}}},
			{Name: "plan", Description: "Switch to plan mode"},
		}}})
}

// SetSessionMode implements acp.Agent.
func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	if err := a.enter(); err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	defer a.leave()
	if a.noControls {
		return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
	}
	s, err := a.lookup(p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	mode := string(p.ModeId)
	if mode != modeDefault && mode != modePlan {
		return acp.SetSessionModeResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown mode " + mode})
	}
	s.setControls(a, func(c *controls) { c.mode = mode })
	return acp.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption implements acp.Agent.
func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if err := a.enter(); err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	defer a.leave()
	if a.noControls {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	v := p.ValueId
	if v == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "the demo agent's options take a value id"})
	}
	s, err := a.lookup(v.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	value := string(v.Value)
	var change func(*controls)
	switch {
	case v.ConfigId == optModel && (value == modelSmall || value == modelLarge):
		change = func(c *controls) { c.model = value }
	case v.ConfigId == optVerbosity && (value == verbosityLow || value == verbosityHigh):
		change = func(c *controls) { c.verbosity = value }
	default:
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{
			"error": fmt.Sprintf("option %s has no value %s", v.ConfigId, strings.TrimSpace(value))})
	}
	c := s.setControls(a, change)
	return acp.SetSessionConfigOptionResponse{ConfigOptions: a.configOptions(c)}, nil
}

// unstableConfigOptions is configOptions in session/fork's answer, whose
// unstable type has the same wire form.
func (a *agent) unstableConfigOptions(c controls) []acp.UnstableSessionConfigOption {
	var out []acp.UnstableSessionConfigOption
	if b, err := json.Marshal(a.configOptions(c)); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}
