package live

import (
	"context"
	"fmt"
	"slices"

	"github.com/berth-sh/berth"
)

// The asking mode (docs/api.md, "Agent controls"): some agents have modes
// of their own in which they answer permissions by themselves (Claude
// Code's auto, acceptEdits, bypassPermissions) and never ask berth, so the
// session's permission_mode would decide nothing. The catalog names them
// (self_deciding_modes) and the agent's mode that asks (asking_mode); a
// conversation that opens in one of them is put in the asking mode, unless
// the session is approve-all (nothing would be asked anyway) or the user
// picked the mode. The Session's acp.modes says so: set_by "berth" and
// forced_from the mode the agent was in.

// Who set the session's mode when it was not the agent (ACPModes.SetBy).
const (
	setByUser  = "user"
	setByBerth = "berth"
)

// modeMark is who set a mode and, when berth did, the agent's mode it
// replaced.
type modeMark struct{ setBy, forcedFrom string }

// onto marks m with mk.
func (mk modeMark) onto(m *berth.ACPModes) { m.SetBy, m.ForcedFrom = mk.setBy, mk.forcedFrom }

// keepMarks carries who set the mode (old) over to the agent's new word on
// its modes (m) while the mode is the same one.
func keepMarks(old, m *berth.ACPModes) {
	if old != nil && old.Current == m.Current {
		m.SetBy, m.ForcedFrom = old.SetBy, old.ForcedFrom
	}
}

// askFirst puts the agent in its asking mode when it is in one that
// answers permissions by itself, as the file comment says. A refusal is a
// runtime_warning: the agent then decides its permissions itself.
func (cs *controls) askFirst(ctx context.Context) {
	ls := cs.ls
	spec := ls.spec
	if spec.AskingMode == "" || len(spec.SelfDecidingModes) == 0 {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ls.mu.Lock()
	perm, modes := ls.sess.PermissionMode, ls.sess.ACP.Modes
	ls.mu.Unlock()
	if perm == berth.PermApproveAll || modes == nil || modes.SetBy == setByUser ||
		!slices.Contains(spec.SelfDecidingModes, modes.Current) {
		return
	}
	from := modes.Current
	why := fmt.Sprintf("it does not offer mode %s", spec.AskingMode)
	if slices.ContainsFunc(modes.Available, func(m berth.ACPMode) bool { return m.ID == spec.AskingMode }) {
		err := cs.setMode(ctx, spec.AskingMode, setByBerth, modeMark{setBy: setByBerth, forcedFrom: from})
		if err == nil {
			return
		}
		why = agentMessage(err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.exited || ls.stopReason != "" {
		return
	}
	ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
		"the agent is in its mode %s, which answers permissions by itself, and did not take mode %s: %s", from, spec.AskingMode, why)})
}
