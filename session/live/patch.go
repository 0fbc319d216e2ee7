package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// controlCallTimeout bounds one set_mode / set_config_option call.
const controlCallTimeout = 30 * time.Second

// Patch is PatchSession on the live session: its own fields, then the
// agent's mode, model and config, each as the agent takes it.
func (ls *Session) Patch(ctx context.Context, p berth.SessionPatch) (*berth.Session, error) {
	return ls.controls.patch(ctx, p)
}

// patch is Patch, with the controls lock held.
func (cs *controls) patch(ctx context.Context, p berth.SessionPatch) (*berth.Session, error) {
	ls := cs.ls
	// Told once the controls lock is released, too.
	defer ls.tellLeaseLost()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ls.mu.Lock()
	cur := ls.sess
	ls.mu.Unlock()
	if p.Agent() && cur.State != berth.StateActive {
		return nil, berth.Errorf(berth.EConflict, "session is %s, not active", cur.State)
	}
	if err := p.CheckLabels(cur.Labels); err != nil {
		return nil, err
	}
	if err := checkPatch(&cur.ACP, &p); err != nil {
		return nil, err
	}
	var applied []string
	if p.Own() {
		if err := ls.save(ctx, func(s *berth.Session) { p.ApplyOwn(s) }); err != nil {
			return nil, err
		}
		applied = append(applied, p.OwnFields()...)
	}
	failed := func(field string, err error) error {
		return &berth.Error{Code: agentErrorCode(err), Err: err,
			Message: fmt.Sprintf("the agent did not set %s: %s (applied: %s)", field, agentMessage(err), orNone(applied)),
			Details: map[string]any{"field": field, "applied": orEmpty(applied)}}
	}
	if p.Mode != "" {
		if err := cs.setMode(ctx, p.Mode, "user", modeMark{setBy: setByUser}); err != nil {
			return nil, failed("mode", err)
		}
		applied = append(applied, "mode")
	}
	if p.Model != "" {
		if err := cs.setModel(ctx, p.Model, "user"); err != nil {
			return nil, failed("model", err)
		}
		applied = append(applied, "model")
	}
	for _, k := range sortedKeys(p.Config) {
		if err := cs.setConfig(ctx, k, p.Config[k], "user"); err != nil {
			return nil, failed("config."+k, err)
		}
		applied = append(applied, "config."+k)
	}
	return ls.View(), nil
}

// checkPatch refuses, before anything is applied, what the agent does not
// offer: EConflict when it lacks the capability, EInvalid (with what it
// offers) for a value it does not offer.
func checkPatch(info *berth.ACPInfo, p *berth.SessionPatch) error {
	var modes, models []string
	if info.Modes != nil {
		for _, m := range info.Modes.Available {
			modes = append(modes, m.ID)
		}
	}
	if info.Models != nil {
		for _, m := range info.Models.Available {
			models = append(models, m.ID)
		}
	}
	if err := checkOffered("mode", p.Mode, modes, "the agent offers no modes"); err != nil {
		return err
	}
	if err := checkOffered("model", p.Model, models, "the agent offers no choice of model"); err != nil {
		return err
	}
	if len(p.Config) > 0 && len(info.ConfigOptions) == 0 {
		return berth.Errorf(berth.EConflict, "the agent offers no config options")
	}
	for _, k := range sortedKeys(p.Config) {
		if err := checkConfig(info.ConfigOptions, p.Config, k); err != nil {
			return err
		}
	}
	return nil
}

// checkOffered refuses value, when one is asked for, unless it is among
// ids, what the agent offers for field: EConflict saying none when it
// offers nothing, else EInvalid with what it offers.
func checkOffered(field, value string, ids []string, none string) error {
	switch {
	case value == "":
		return nil
	case len(ids) == 0:
		return berth.Errorf(berth.EConflict, "%s", none)
	case !slices.Contains(ids, value):
		return offered(field, value, ids)
	}
	return nil
}

// checkConfig refuses the value config[k] unless the agent offers option k
// and the value fits its type; a boolean given as a string is taken as
// the boolean.
func checkConfig(opts []berth.ACPConfigOption, config map[string]json.RawMessage, k string) error {
	o := findOption(opts, k)
	if o == nil {
		var ids []string
		for _, o := range opts {
			ids = append(ids, o.ID)
		}
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("the agent has no config option %q (it offers %s)", k, strings.Join(ids, ", ")),
			Details: map[string]any{"field": "config", "option": k, "offered": ids}}
	}
	v := config[k]
	switch o.Type {
	case "select":
		var s string
		if json.Unmarshal(v, &s) != nil || !o.Offers(s) {
			e := offered("config."+k, strings.TrimSpace(string(v)), o.Values())
			e.Details["option"] = k
			return e
		}
	case "boolean":
		// "true" and "false" as strings are taken too (the CLI sends strings).
		switch strings.TrimSpace(string(v)) {
		case `"true"`:
			config[k] = json.RawMessage("true")
		case `"false"`:
			config[k] = json.RawMessage("false")
		}
		if t := strings.TrimSpace(string(config[k])); t != "true" && t != "false" {
			return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("config option %q takes true or false", k),
				Details: map[string]any{"field": "config." + k, "option": k, "offered": []bool{false, true}}}
		}
	default:
		// A type this version does not know: the agent judges the value.
		if !json.Valid(v) {
			return berth.Errorf(berth.EInvalid, "config option %q: the value is not JSON", k)
		}
	}
	return nil
}

// offered is the EInvalid error for a value not offered, listing the offer.
func offered(field, value string, ids []string) *berth.Error {
	return &berth.Error{Code: berth.EInvalid,
		Message: fmt.Sprintf("the agent does not offer %s %s (it offers %s)", field, value, strings.Join(ids, ", ")),
		Details: map[string]any{"field": field, "offered": orEmpty(ids)}}
}

// findOption returns the config option id, or nil.
func findOption(opts []berth.ACPConfigOption, id string) *berth.ACPConfigOption {
	for i := range opts {
		if opts[i].ID == id {
			return &opts[i]
		}
	}
	return nil
}

// setMode asks the agent for mode (set_mode, or set_config_option for
// modes offered as a config option) and records it with a mode_update,
// marked as set by whom mark says.
func (cs *controls) setMode(ctx context.Context, mode, source string, mark modeMark) error {
	ls := cs.ls
	ls.mu.Lock()
	modes := ls.sess.ACP.Modes
	ls.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	if modes != nil && modes.ConfigID != "" {
		return cs.setConfigThen(ctx, modes.ConfigID, quote(mode), source, func(c *berth.ACPInfo) {
			if c.Modes != nil {
				mark.onto(c.Modes)
			}
		})
	}
	if err := ls.client.SetMode(cctx, ls.conv.id(), mode); err != nil {
		return err
	}
	return cs.record(ctx, func(c *berth.ACPInfo) (string, any) {
		if c.Modes == nil {
			c.Modes = &berth.ACPModes{Available: []berth.ACPMode{}}
		}
		c.Modes.Current = mode
		mark.onto(c.Modes)
		// The agent's config option of category mode, where it also has one,
		// says the same: a resume sets again what it says.
		for i := range c.ConfigOptions {
			if o := &c.ConfigOptions[i]; o.Category == categoryMode && o.Offers(mode) {
				o.Current = quote(mode)
			}
		}
		return berth.EventModeUpdate, modeData{Current: mode, Source: source, ForcedFrom: c.Modes.ForcedFrom}
	})
}

// setModel asks the agent for model: through its config option of
// category model, or session/set_model when it offers only that.
func (cs *controls) setModel(ctx context.Context, model, source string) error {
	ls := cs.ls
	ls.mu.Lock()
	models := ls.sess.ACP.Models
	ls.mu.Unlock()
	if models != nil && models.ConfigID != "" {
		return cs.setConfig(ctx, models.ConfigID, quote(model), source)
	}
	cctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	if err := ls.client.SetModel(cctx, ls.conv.id(), model); err != nil {
		return err
	}
	return cs.record(ctx, func(c *berth.ACPInfo) (string, any) {
		if c.Models != nil {
			c.Models.Current = model
		}
		return berth.EventConfigUpdate, configData{Models: c.Models, Source: source,
			Changed: map[string]json.RawMessage{"model": quote(model)}}
	})
}

// setConfig sets one config option and records the agent's options after
// it with a config_update.
func (cs *controls) setConfig(ctx context.Context, id string, value json.RawMessage, source string) error {
	return cs.setConfigThen(ctx, id, value, source, nil)
}

// setConfigThen is setConfig; then, when set, changes the controls
// further in the same record (the marks of a mode set as an option).
func (cs *controls) setConfigThen(ctx context.Context, id string, value json.RawMessage, source string, then func(c *berth.ACPInfo)) error {
	ls := cs.ls
	cctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	resp, err := ls.client.SetConfigOption(cctx, ls.conv.id(), id, value)
	if err != nil {
		return err
	}
	opts, ok := decodeConfigOptions(resp.ConfigOptions)
	return cs.record(ctx, func(c *berth.ACPInfo) (string, any) {
		if ok {
			c.ConfigOptions = opts
		} else if o := findOption(c.ConfigOptions, id); o != nil {
			// An agent that answers without its options: take the value.
			o.Current = value
		}
		derive(c)
		if then != nil {
			then(c)
		}
		return berth.EventConfigUpdate, configData{ConfigOptions: c.ConfigOptions, Source: source,
			Changed: map[string]json.RawMessage{id: value}}
	})
}

// record takes a control the agent set into the session's controls
// (change, on a copy of them) and stores the session, then logs the event
// change says, unless the agent is gone (session_stopped is last).
func (cs *controls) record(ctx context.Context, change func(c *berth.ACPInfo) (typ string, data any)) error {
	ls := cs.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var typ string
	var data any
	err := ls.saveLocked(context.WithoutCancel(ctx), ls.sess.State, func(s *berth.Session) {
		c := controlsOf(s.ACP)
		typ, data = change(&c)
		s.ACP = withControls(s.ACP, c)
	})
	if !ls.exited {
		ls.Emit(ls.turns.currentIDLocked(), typ, data)
	}
	return err
}

// reapply sets the mode and config values the session had before
// it stopped where the agent came back with others (a conversation it
// could not reopen starts with its defaults). A failure is a warning.
// The caller tells of a lease lost (tellLeaseLost): it may hold authMu.
func (cs *controls) reapply(ctx context.Context, prev berth.ACPInfo) {
	ls := cs.ls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ls.mu.Lock()
	cur := ls.sess.ACP
	ls.mu.Unlock()
	warn := func(what string, err error) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.exited || ls.stopReason != "" {
			return
		}
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
			"the agent came back with another %s and did not take the session's again: %s", what, agentMessage(err))})
	}
	if prev.Modes != nil && cur.Modes != nil && prev.Modes.ConfigID == "" && prev.Modes.Current != "" &&
		prev.Modes.Current != cur.Modes.Current {
		for _, m := range cur.Modes.Available {
			if m.ID == prev.Modes.Current {
				if err := cs.setMode(ctx, m.ID, "resume", modeMark{setBy: prev.Modes.SetBy, forcedFrom: prev.Modes.ForcedFrom}); err != nil {
					warn("mode", err)
				}
			}
		}
	}
	if prev.Models != nil && cur.Models != nil && prev.Models.ConfigID == "" && cur.Models.ConfigID == "" &&
		prev.Models.Current != "" && prev.Models.Current != cur.Models.Current {
		if err := cs.setModel(ctx, prev.Models.Current, "resume"); err != nil {
			warn("model", err)
		}
	}
	changed := changedConfig(prev.ConfigOptions, cur.ConfigOptions)
	for _, k := range sortedKeys(changed) {
		var then func(c *berth.ACPInfo)
		if prev.Modes != nil && prev.Modes.ConfigID == k {
			// Modes offered as this option: who set the mode stays.
			mark := modeMark{setBy: prev.Modes.SetBy, forcedFrom: prev.Modes.ForcedFrom}
			then = func(c *berth.ACPInfo) {
				if c.Modes != nil {
					mark.onto(c.Modes)
				}
			}
		}
		if err := cs.setConfigThen(ctx, k, changed[k], "resume", then); err != nil {
			warn("config option "+k, err)
		}
	}
}

// agentErrorCode is the code of an agent's refusal: conflict when it does
// not serve the method, invalid when it refuses the params, unavailable
// otherwise (it failed or is gone).
func agentErrorCode(err error) string {
	var ae *acp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case acp.CodeMethodNotFound:
			return berth.EConflict
		case acp.CodeInvalidParams:
			return berth.EInvalid
		}
	}
	return berth.EUnavailable
}

// agentMessage is what an agent's error says, safe to show.
func agentMessage(err error) string {
	var ae *acp.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the agent did not answer in time"
	}
	return "the agent could not be reached"
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
