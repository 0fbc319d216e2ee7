package berth

import (
	"bytes"
	"encoding/json"
)

// ACPModes is the agent's session modes (docs/api.md, "Agent controls"): the
// current one and those it offers. Raw is the agent's own mode state, kept
// whole so fields this version does not know still reach clients.
type ACPModes struct {
	Current   string          `json:"current"`
	Available []ACPMode       `json:"available"`
	Raw       json.RawMessage `json:"raw,omitempty"`
	// ConfigID is set when the modes come from a config option of category
	// `mode` rather than ACP's mode state: a change is then
	// session/set_config_option on it.
	ConfigID string `json:"config_id,omitempty"`
	// SetBy says who chose Current when it was not the agent: "user" (a
	// PATCH) or "berth" (it replaced ForcedFrom, a mode in which the agent
	// answers permissions by itself; docs/api.md, "Agent controls").
	SetBy      string `json:"set_by,omitempty"`
	ForcedFrom string `json:"forced_from,omitempty"`
}

// ACPMode is one mode an agent offers.
type ACPMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// ACPModels is the agent's models: the current one and those it offers,
// from its config option of category `model` (ConfigID), or from the older
// unstable models state where that is all the agent sends (Raw).
type ACPModels struct {
	Current   string          `json:"current"`
	Available []ACPModel      `json:"available"`
	ConfigID  string          `json:"config_id,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty"`
}

// ACPModel is one model an agent offers.
type ACPModel struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// ACPConfigOption is one of the agent's session configuration options.
// Current is the value as the agent gives it (a string for `select`, a
// boolean for `boolean`); Raw is the agent's whole option.
type ACPConfigOption struct {
	ID          string           `json:"id"`
	Name        string           `json:"name"`
	Type        string           `json:"type"`
	Category    string           `json:"category,omitempty"`
	Description string           `json:"description,omitempty"`
	Current     json.RawMessage  `json:"current"`
	Options     []ACPConfigValue `json:"options,omitempty"`
	Raw         json.RawMessage  `json:"raw,omitempty"`
}

// ACPConfigValue is one value a select config option offers (Group names
// its group when the agent groups them).
type ACPConfigValue struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Group       string `json:"group,omitempty"`
}

// CurrentString returns the option's current value when it is a string.
func (o *ACPConfigOption) CurrentString() string {
	var s string
	_ = json.Unmarshal(o.Current, &s)
	return s
}

// Offers reports whether a select option offers value.
func (o *ACPConfigOption) Offers(value string) bool {
	for _, v := range o.Options {
		if v.Value == value {
			return true
		}
	}
	return false
}

// Values lists the values a select option offers.
func (o *ACPConfigOption) Values() []string {
	out := make([]string, 0, len(o.Options))
	for _, v := range o.Options {
		out = append(out, v.Value)
	}
	return out
}

// ACPCommand is one slash command the agent offers (ACP
// available_commands_update). Raw is the agent's whole command.
type ACPCommand struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputHint   string          `json:"input_hint,omitempty"`
	Raw         json.RawMessage `json:"raw,omitempty"`
}

// SessionPatch is the body of PATCH /v1/sessions/{id} (docs/api.md, "Agent
// controls"): each field given is changed, the rest kept. Name and Labels are
// berth's own; Labels merges like a JSON merge patch (a key set to null is
// removed). Mode, Model and Config go to the agent. Config maps an option id to
// its value (a string for a select option, a boolean for a boolean one).
type SessionPatch struct {
	Name   *string                    `json:"name,omitempty"`
	Labels map[string]*string         `json:"labels,omitempty"`
	Mode   string                     `json:"mode,omitempty"`
	Model  string                     `json:"model,omitempty"`
	Config map[string]json.RawMessage `json:"config,omitempty"`
	// MaxCostUSD and MaxTokens set the session's budgets (docs/api.md,
	// "Usage and budgets"), berth's own too.
	MaxCostUSD *float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  *int64   `json:"max_tokens,omitempty"`
}

// Agent reports whether the patch asks anything of the agent.
func (p *SessionPatch) Agent() bool { return p.Mode != "" || p.Model != "" || len(p.Config) > 0 }

// Empty reports whether the patch changes nothing.
func (p *SessionPatch) Empty() bool { return !p.Own() && !p.Agent() }

// Own reports whether the patch changes any field of berth's own (see
// ApplyOwn).
func (p *SessionPatch) Own() bool {
	return p.Name != nil || p.Labels != nil || p.MaxCostUSD != nil || p.MaxTokens != nil
}

// JSONEqual reports whether two JSON values are the same text once
// surrounding blanks are removed (enough for the scalars config values are).
func JSONEqual(a, b json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
}
