package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	if p.Name != nil || p.Labels != nil {
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
		if err := cs.setMode(ctx, p.Mode, "user"); err != nil {
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
// offers) for a value it does not offer. It also refuses more labels than
// a session may have.
func checkPatch(info *berth.ACPInfo, p *berth.SessionPatch) error {
	if p.Mode != "" {
		if info.Modes == nil || len(info.Modes.Available) == 0 {
			return berth.Errorf(berth.EConflict, "the agent offers no modes")
		}
		var ids []string
		for _, m := range info.Modes.Available {
			ids = append(ids, m.ID)
		}
		if !contains(ids, p.Mode) {
			return offered("mode", p.Mode, ids)
		}
	}
	if p.Model != "" {
		if info.Models == nil || len(info.Models.Available) == 0 {
			return berth.Errorf(berth.EConflict, "the agent offers no choice of model")
		}
		var ids []string
		for _, m := range info.Models.Available {
			ids = append(ids, m.ID)
		}
		if !contains(ids, p.Model) {
			return offered("model", p.Model, ids)
		}
	}
	if len(p.Config) > 0 && len(info.ConfigOptions) == 0 {
		return berth.Errorf(berth.EConflict, "the agent offers no config options")
	}
	for _, k := range sortedKeys(p.Config) {
		o := findOption(info.ConfigOptions, k)
		if o == nil {
			var ids []string
			for _, o := range info.ConfigOptions {
				ids = append(ids, o.ID)
			}
			return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("the agent has no config option %q (it offers %s)", k, strings.Join(ids, ", ")),
				Details: map[string]any{"field": "config", "option": k, "offered": ids}}
		}
		v := p.Config[k]
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
				p.Config[k] = json.RawMessage("true")
			case `"false"`:
				p.Config[k] = json.RawMessage("false")
			}
			if t := strings.TrimSpace(string(p.Config[k])); t != "true" && t != "false" {
				return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("config option %q takes true or false", k),
					Details: map[string]any{"field": "config." + k, "option": k, "offered": []bool{false, true}}}
			}
		default:
			// A type this version does not know: the agent judges the value.
			if !json.Valid(v) {
				return berth.Errorf(berth.EInvalid, "config option %q: the value is not JSON", k)
			}
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
// modes offered as a config option) and records it with a mode_update.
func (cs *controls) setMode(ctx context.Context, mode, source string) error {
	ls := cs.ls
	ls.mu.Lock()
	modes := ls.sess.ACP.Modes
	ls.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	if modes != nil && modes.ConfigID != "" {
		return cs.setConfig(ctx, modes.ConfigID, quote(mode), source)
	}
	if err := ls.client.SetMode(cctx, ls.conv.id(), mode); err != nil {
		return err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	err := ls.saveLocked(context.WithoutCancel(ctx), ls.sess.State, func(s *berth.Session) {
		c := controlsOf(s.ACP)
		if c.Modes == nil {
			c.Modes = &berth.ACPModes{Available: []berth.ACPMode{}}
		}
		c.Modes.Current = mode
		s.ACP = withControls(s.ACP, c)
	})
	// Nothing is logged once the agent is gone: session_stopped is last.
	if !ls.exited {
		ls.Emit(ls.turns.currentIDLocked(), berth.EventModeUpdate, modeData{Current: mode, Source: source})
	}
	return err
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
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var after *berth.ACPModels
	err := ls.saveLocked(context.WithoutCancel(ctx), ls.sess.State, func(s *berth.Session) {
		c := controlsOf(s.ACP)
		if c.Models != nil {
			c.Models.Current = model
		}
		after = c.Models
		s.ACP = withControls(s.ACP, c)
	})
	// Nothing is logged once the agent is gone: session_stopped is last.
	if !ls.exited {
		ls.Emit(ls.turns.currentIDLocked(), berth.EventConfigUpdate, configData{Models: after, Source: source,
			Changed: map[string]json.RawMessage{"model": quote(model)}})
	}
	return err
}

// setConfig sets one config option and records the agent's options after
// it with a config_update.
func (cs *controls) setConfig(ctx context.Context, id string, value json.RawMessage, source string) error {
	ls := cs.ls
	cctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	resp, err := ls.client.SetConfigOption(cctx, ls.conv.id(), id, value)
	if err != nil {
		return err
	}
	opts, ok := decodeConfigOptions(resp.ConfigOptions)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var after []berth.ACPConfigOption
	err = ls.saveLocked(context.WithoutCancel(ctx), ls.sess.State, func(s *berth.Session) {
		c := controlsOf(s.ACP)
		if ok {
			c.ConfigOptions = opts
		} else if o := findOption(c.ConfigOptions, id); o != nil {
			// An agent that answers without its options: take the value.
			o.Current = value
		}
		derive(&c)
		after = c.ConfigOptions
		s.ACP = withControls(s.ACP, c)
	})
	// Nothing is logged once the agent is gone: session_stopped is last.
	if !ls.exited {
		ls.Emit(ls.turns.currentIDLocked(), berth.EventConfigUpdate, configData{ConfigOptions: after, Source: source,
			Changed: map[string]json.RawMessage{id: value}})
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
				if err := cs.setMode(ctx, m.ID, "resume"); err != nil {
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
		if err := cs.setConfig(ctx, k, changed[k], "resume"); err != nil {
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

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
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
