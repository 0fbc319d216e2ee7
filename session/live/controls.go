package live

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// controls are the agent's mode, model and config as the session changes
// them (patch.go) and takes the agent's word on them (applyLocked).
type controls struct {
	ls *Session
	// mu serialises the changes (PATCH and the re-apply after a resume),
	// which call the agent without holding the session's mu (the lock
	// order is written on Session).
	mu sync.Mutex
}

// applyLocked records a control update the agent sent: the session
// takes it (stored) and, unless replaying, the log says so. Under mu.
func (cs *controls) applyLocked(u *controlUpdate) {
	ls := cs.ls
	if ls.sess.State == berth.StateStarting {
		// During the handshake the session takes it at once and the store
		// with the save that ends the handshake (active, failed, or
		// waiting for authentication), which writes the whole session:
		// no write of its own between the agent's session/new and the
		// answer behind it in the stream.
		u.apply(&ls.sess)
		ls.changedLocked()
		return
	}
	if err := ls.saveLocked(context.Background(), ls.sess.State, u.apply); err != nil {
		ls.logger.Warn("record the agent's controls", "kind", u.kind, "err", err)
	}
}

// This file turns what an agent says about its controls (modes, models,
// config options, commands, title: docs/api.md, Agent controls) into the Session's acp
// object. patch.go changes them.

// Bounds on what an agent's controls may take in the Session (stored, and
// sent with every list and change): past them items are dropped, text is
// cut and raw JSON is left out.
const (
	maxControlItems = 128
	maxControlText  = 1024
	maxControlRaw   = 4096
	// maxConfigValues bounds the values of all config options together:
	// maxControlItems options of maxControlItems values each would make
	// a Session of tens of megabytes.
	maxConfigValues = 512
)

// clip cuts s to maxControlText bytes at a rune boundary.
func clip(s string) string {
	if len(s) <= maxControlText {
		return s
	}
	s = s[:maxControlText]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// rawIfSmall returns raw when it is small enough to keep.
func rawIfSmall(raw json.RawMessage) json.RawMessage {
	if len(raw) > maxControlRaw {
		return nil
	}
	return raw
}

// maxInitRaw bounds each part of an agent's initialize answer that the
// Session keeps (agent_info, capabilities, auth_methods); an honest
// agent's are a few hundred bytes.
const maxInitRaw = 64 << 10

// boundInit leaves out (and logs) a part of init over maxInitRaw: kept
// whole it would make every list and change of the Session as large (up
// to the agent's line cap).
func boundInit(init *acp.InitializeResponse, logger *slog.Logger) {
	for _, f := range []struct {
		name string
		raw  *json.RawMessage
	}{{"agentInfo", &init.AgentInfo}, {"agentCapabilities", &init.AgentCapabilities}, {"authMethods", &init.AuthMethods}} {
		if len(*f.raw) > maxInitRaw {
			logger.Warn("the agent's initialize answer is too large to keep: left out", "field", f.name, "bytes", len(*f.raw), "limit", maxInitRaw)
			*f.raw = nil
		}
	}
}

// Config option categories berth gives a place of their own.
const (
	categoryMode  = "mode"
	categoryModel = "model"
)

// modeStateWire is ACP's SessionModeState.
type modeStateWire struct {
	CurrentModeID  string `json:"currentModeId"`
	AvailableModes []struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"availableModes"`
}

// modelStateWire is the unstable SessionModelState some agents still send.
type modelStateWire struct {
	CurrentModelID  string `json:"currentModelId"`
	AvailableModels []struct {
		ModelID     string `json:"modelId"`
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"availableModels"`
}

// configValueWire is one value of a select option.
type configValueWire struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// configOptionWire is ACP's SessionConfigOption: options is a flat list of
// values or a list of groups of them.
type configOptionWire struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Category     string          `json:"category"`
	Description  string          `json:"description"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      []struct {
		configValueWire
		Group   string            `json:"group"`
		Options []configValueWire `json:"options"`
	} `json:"options"`
}

// commandWire is ACP's AvailableCommand.
type commandWire struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       *struct {
		Hint string `json:"hint"`
	} `json:"input"`
}

// decodeModes turns a SessionModeState into the Session's modes; nil when
// raw is absent or not a mode state.
func decodeModes(raw json.RawMessage) *berth.ACPModes {
	var w modeStateWire
	if !present(raw) || json.Unmarshal(raw, &w) != nil {
		return nil
	}
	m := &berth.ACPModes{Current: clip(w.CurrentModeID), Available: []berth.ACPMode{}, Raw: rawIfSmall(raw)}
	for _, a := range w.AvailableModes[:min(len(w.AvailableModes), maxControlItems)] {
		m.Available = append(m.Available, berth.ACPMode{ID: clip(a.ID), Name: clip(a.Name), Description: clip(a.Description)})
	}
	return m
}

// decodeModels turns the unstable SessionModelState into the Session's models.
func decodeModels(raw json.RawMessage) *berth.ACPModels {
	var w modelStateWire
	if !present(raw) || json.Unmarshal(raw, &w) != nil {
		return nil
	}
	m := &berth.ACPModels{Current: clip(w.CurrentModelID), Available: []berth.ACPModel{}, Raw: rawIfSmall(raw)}
	for _, a := range w.AvailableModels[:min(len(w.AvailableModels), maxControlItems)] {
		m.Available = append(m.Available, berth.ACPModel{ID: clip(a.ModelID), Name: clip(a.Name), Description: clip(a.Description)})
	}
	return m
}

// decodeConfigOptions turns a list of SessionConfigOption into the
// Session's config options; ok is false when raw is absent or not a list.
// An option that does not decode is kept with its raw JSON alone.
func decodeConfigOptions(raw json.RawMessage) (opts []berth.ACPConfigOption, ok bool) {
	var items []json.RawMessage
	if !present(raw) || json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	opts = []berth.ACPConfigOption{}
	values := 0
	for _, item := range items[:min(len(items), maxControlItems)] {
		var w configOptionWire
		if json.Unmarshal(item, &w) != nil {
			opts = append(opts, berth.ACPConfigOption{Current: json.RawMessage("null"), Raw: rawIfSmall(item)})
			continue
		}
		o := berth.ACPConfigOption{ID: clip(w.ID), Name: clip(w.Name), Type: clip(w.Type), Category: clip(w.Category),
			Description: clip(w.Description), Current: w.CurrentValue, Raw: rawIfSmall(item)}
		if len(o.Current) == 0 || len(o.Current) > maxControlText {
			o.Current = json.RawMessage("null")
		}
		add := func(v configValueWire, group string) {
			if len(o.Options) < maxControlItems && values < maxConfigValues {
				values++
				o.Options = append(o.Options, berth.ACPConfigValue{Value: clip(v.Value), Name: clip(v.Name), Description: clip(v.Description), Group: clip(group)})
			}
		}
		for _, v := range w.Options {
			if len(v.Options) > 0 || v.Group != "" {
				for _, g := range v.Options {
					add(g, v.Group)
				}
				continue
			}
			add(v.configValueWire, "")
		}
		opts = append(opts, o)
	}
	return opts, true
}

// decodeCommands turns an available_commands_update into the Session's
// commands.
func decodeCommands(update json.RawMessage) []berth.ACPCommand {
	var w struct {
		AvailableCommands []json.RawMessage `json:"availableCommands"`
	}
	_ = json.Unmarshal(update, &w)
	out := []berth.ACPCommand{}
	for _, raw := range w.AvailableCommands[:min(len(w.AvailableCommands), maxControlItems)] {
		var c commandWire
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		cmd := berth.ACPCommand{Name: clip(c.Name), Description: clip(c.Description), Raw: rawIfSmall(raw)}
		if c.Input != nil {
			cmd.InputHint = clip(c.Input.Hint)
		}
		out = append(out, cmd)
	}
	return out
}

// present reports whether raw holds a value other than null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// applySetup takes what session/new, load or resume answered into info;
// what the answer leaves out stays as it was.
func applySetup(info *berth.ACPInfo, s acp.SessionSetup) {
	if m := decodeModes(s.Modes); m != nil {
		keepMarks(info.Modes, m)
		info.Modes = m
	}
	if m := decodeModels(s.Models); m != nil {
		info.Models = m
	}
	if opts, ok := decodeConfigOptions(s.ConfigOptions); ok {
		info.ConfigOptions = opts
	}
	derive(info)
}

// derive fills models (and modes, for an agent without a mode state) from
// the config options of category model (mode): the current ACP schema's
// way of offering them.
func derive(info *berth.ACPInfo) {
	for i := range info.ConfigOptions {
		o := &info.ConfigOptions[i]
		switch {
		case o.Category == categoryModel:
			m := &berth.ACPModels{Current: o.CurrentString(), Available: []berth.ACPModel{}, ConfigID: o.ID}
			for _, v := range o.Options {
				m.Available = append(m.Available, berth.ACPModel{ID: v.Value, Name: v.Name, Description: v.Description})
			}
			info.Models = m
		case o.Category == categoryMode && (info.Modes == nil || info.Modes.ConfigID != ""):
			m := &berth.ACPModes{Current: o.CurrentString(), Available: []berth.ACPMode{}, ConfigID: o.ID}
			for _, v := range o.Options {
				m.Available = append(m.Available, berth.ACPMode{ID: v.Value, Name: v.Name, Description: v.Description})
			}
			keepMarks(info.Modes, m)
			info.Modes = m
		}
	}
}

// controlsOf copies the controls of info, so that a change builds a new
// value and never writes into a Session someone else holds.
func controlsOf(info berth.ACPInfo) berth.ACPInfo {
	out := berth.ACPInfo{ConfigOptions: slices.Clone(info.ConfigOptions), Commands: slices.Clone(info.Commands)}
	if info.Modes != nil {
		m := *info.Modes
		out.Modes = &m
	}
	if info.Models != nil {
		m := *info.Models
		out.Models = &m
	}
	return out
}

// withControls returns info with the controls of c.
func withControls(info, c berth.ACPInfo) berth.ACPInfo {
	info.Modes, info.Models, info.ConfigOptions, info.Commands = c.Modes, c.Models, c.ConfigOptions, c.Commands
	return info
}

// controlUpdate is what one agent update changes in the session: nil when
// it is not a control update.
type controlUpdate struct {
	kind  string
	apply func(s *berth.Session)
	// data is the event's data (nil: keep the raw one).
	data any
}

// modeData is the data of mode_update.
type modeData struct {
	Current string `json:"current"`
	// Source is "agent" (its update), "user" (PATCH), "resume" (berth
	// set the mode the session had before it was resumed) or "berth" (it
	// took the agent out of ForcedFrom, a mode that answers permissions
	// by itself: askingmode.go).
	Source     string          `json:"source"`
	ForcedFrom string          `json:"forced_from,omitempty"`
	Raw        json.RawMessage `json:"raw,omitempty"`
}

// configData is the data of config_update.
type configData struct {
	ConfigOptions []berth.ACPConfigOption `json:"config_options,omitempty"`
	Models        *berth.ACPModels        `json:"models,omitempty"`
	// Changed is what a user or a resume set: option id → value.
	Changed map[string]json.RawMessage `json:"changed,omitempty"`
	Source  string                     `json:"source"`
	Raw     json.RawMessage            `json:"raw,omitempty"`
}

// commandsData is the data of commands_update.
type commandsData struct {
	Commands []berth.ACPCommand `json:"commands"`
	Raw      json.RawMessage    `json:"raw"`
}

// controlUpdateOf maps an agent update to the change it makes, or nil.
func controlUpdateOf(u *acp.Update) *controlUpdate {
	switch u.Kind {
	case acp.UpdateCurrentMode:
		var w struct {
			CurrentModeID string `json:"currentModeId"`
		}
		_ = json.Unmarshal(u.Raw, &w)
		// Bounded like every other control the Session keeps.
		w.CurrentModeID = clip(w.CurrentModeID)
		return &controlUpdate{kind: u.Kind, data: modeData{Current: w.CurrentModeID, Source: "agent", Raw: u.Raw},
			apply: func(s *berth.Session) {
				c := controlsOf(s.ACP)
				if c.Modes == nil {
					c.Modes = &berth.ACPModes{Available: []berth.ACPMode{}}
				}
				if c.Modes.Current != w.CurrentModeID {
					// A mode the agent went to by itself is its own.
					c.Modes.SetBy, c.Modes.ForcedFrom = "", ""
				}
				c.Modes.Current = w.CurrentModeID
				s.ACP = withControls(s.ACP, c)
			}}
	case acp.UpdateConfigOption:
		var w struct {
			ConfigOptions json.RawMessage `json:"configOptions"`
		}
		_ = json.Unmarshal(u.Raw, &w)
		opts, ok := decodeConfigOptions(w.ConfigOptions)
		if !ok {
			return nil
		}
		d := configData{ConfigOptions: opts, Source: "agent", Raw: u.Raw}
		return &controlUpdate{kind: u.Kind, data: d, apply: func(s *berth.Session) {
			c := controlsOf(s.ACP)
			c.ConfigOptions = opts
			derive(&c)
			s.ACP = withControls(s.ACP, c)
		}}
	case acp.UpdateAvailableCommands:
		cmds := decodeCommands(u.Raw)
		return &controlUpdate{kind: u.Kind, data: commandsData{Commands: cmds, Raw: u.Raw}, apply: func(s *berth.Session) {
			c := controlsOf(s.ACP)
			c.Commands = cmds
			s.ACP = withControls(s.ACP, c)
		}}
	case acp.UpdateSessionInfo:
		var w struct {
			Title *json.RawMessage `json:"title"`
		}
		if json.Unmarshal(u.Raw, &w) != nil || w.Title == nil {
			return nil
		}
		// A null title clears it.
		var title string
		_ = json.Unmarshal(*w.Title, &title)
		return &controlUpdate{kind: u.Kind, apply: func(s *berth.Session) { s.Title = sanitizeTitle(title) }}
	}
	return nil
}

// maxTitleBytes bounds an agent's title, like a session's name.
const maxTitleBytes = berth.MaxNameBytes

// sanitizeTitle keeps an agent's title plain, bounded text: control
// characters become spaces.
func sanitizeTitle(t string) string {
	b := []rune{}
	n := 0
	for _, r := range t {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		if n+len(string(r)) > maxTitleBytes {
			break
		}
		n += len(string(r))
		b = append(b, r)
	}
	return string(b)
}

// changedConfig returns, for each select or boolean option of prev that
// cur still offers with another value, prev's value.
func changedConfig(prev, cur []berth.ACPConfigOption) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, p := range prev {
		for _, c := range cur {
			if c.ID != p.ID || berth.JSONEqual(c.Current, p.Current) || !present(p.Current) {
				continue
			}
			switch c.Type {
			case "select":
				if c.Offers(p.CurrentString()) {
					out[c.ID] = p.Current
				}
			case "boolean":
				out[c.ID] = p.Current
			}
		}
	}
	return out
}

// sortedKeys returns m's keys in order: the order config changes apply in.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
