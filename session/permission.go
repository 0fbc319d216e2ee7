package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// Permission requests as API objects (CONTRACT §4.5). Each request is
// stored, logged as permission_requested, and then answered by the
// session's policy, by a decision the user gave earlier for the same tool
// kind (allow_always, reject_always), or, in ask mode, by whoever comes
// first of the user, the timeout and a cancel. Every request waits on its
// own goroutine (the ACP connection serves each inbound request on one), so
// a question pending in one session holds up nothing else, not even the
// same session's stream of updates.

// permWaiter is a permission request waiting for a decision.
type permWaiter struct {
	p        berth.Permission
	toolKind string
	answer   chan acp.RequestPermissionResponse // buffered: the decider never blocks
	timer    *time.Timer
}

// resolvedData is the data of permission_resolved.
type resolvedData struct {
	PermissionID string `json:"permission_id"`
	OptionID     string `json:"option_id,omitempty"`
	DecidedBy    string `json:"decided_by"`
	// Remembered is set when an earlier allow_always or reject_always decided.
	Remembered bool `json:"remembered,omitempty"`
}

// readKinds are the ACP tool kinds approve-reads allows.
var readKinds = map[string]bool{"read": true, "search": true, "think": true}

// RequestPermission answers one request of the agent; see above.
func (h *agentHandler) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	rt := h.rt
	kind := req.ToolCallKind()
	p := berth.Permission{ID: ids.New("perm"), SessionID: rt.id, ToolCall: req.ToolCall,
		Options: []berth.PermissionOption{}, State: berth.PermissionPending, CreatedAt: time.Now().UTC()}
	for _, o := range req.Options {
		p.Options = append(p.Options, berth.PermissionOption{ID: o.OptionID, Name: o.Name, Kind: o.Kind})
	}
	if len(p.ToolCall) == 0 || !json.Valid(p.ToolCall) {
		p.ToolCall = json.RawMessage(`{}`)
	}

	rt.mu.Lock()
	p.TurnID = rt.currentTurnIDLocked()
	if old, ok := rt.adoptLocked(p); ok {
		// Asked before the daemon restarted: the record and its event exist.
		w := &permWaiter{p: old, toolKind: kind, answer: make(chan acp.RequestPermissionResponse, 1)}
		rt.waitLocked(w)
		rt.mu.Unlock()
		return rt.await(ctx, w)
	}
	rt.mu.Unlock()
	var cancelled bool
	var mode, remembered string

	// Held until the event is logged: a detach waits for the pair.
	rt.recordMu.RLock()
	if rt.detached.Load() {
		rt.recordMu.RUnlock()
		// The daemon let go of the agent: the next one is asked.
		return acp.Cancelled(), nil
	}
	// The record exists before anyone can see the request.
	if err := rt.h.store.CreatePermission(context.WithoutCancel(ctx), &p); err != nil {
		rt.recordMu.RUnlock()
		rt.logger.Error("store permission", "err", err)
		return acp.Cancelled(), nil
	}

	rt.mu.Lock()
	// The session may have moved on while the record was written: a cancel,
	// a stop or the end of the turn answers the request at once.
	tag := rt.turnTagLocked(p.TurnID)
	cancelled = rt.exited || rt.stopReason != "" || (p.TurnID != "" && tag == "") ||
		(rt.turn != nil && rt.turn.id == p.TurnID && rt.turn.cancelRequested)
	mode, remembered = rt.sess.PermissionMode, rt.remembered[kind]
	rt.emit(tag, berth.EventPermissionRequested, map[string]any{"permission": p})
	rt.recordMu.RUnlock()
	switch {
	case cancelled:
		rt.mu.Unlock()
		return rt.settle(ctx, &p, berth.PermissionCanceled, "", berth.DecidedByCancel, false)
	case remembered != "":
		rt.mu.Unlock()
		opt := pickOption(req.Options, remembered == berth.DecisionAllowAlways)
		return rt.settle(ctx, &p, berth.PermissionDecided, opt, berth.DecidedByPolicy, true)
	case mode != berth.PermAsk:
		rt.mu.Unlock()
		allow := mode == berth.PermApproveAll || (mode == berth.PermApproveReads && readKinds[kind])
		return rt.settle(ctx, &p, berth.PermissionDecided, pickOption(req.Options, allow), berth.DecidedByPolicy, false)
	}

	// Ask: wait for the user, the timeout, a cancel or the connection's end.
	w := &permWaiter{p: p, toolKind: kind, answer: make(chan acp.RequestPermissionResponse, 1)}
	rt.waitLocked(w)
	rt.mu.Unlock()
	return rt.await(ctx, w)
}

// waitLocked makes w a request waiting for a decision, with its timeout.
func (rt *runtime) waitLocked(w *permWaiter) {
	id := w.p.ID
	rt.perms[id] = w
	rt.sess.PendingPermissions++
	rt.changedLocked()
	rt.wg.Add(1)
	w.timer = time.AfterFunc(rt.h.limits.PermissionTimeout, func() {
		defer rt.wg.Done()
		rt.expirePermission(id)
	})
}

// await waits for w's decision or the end of the agent's connection.
func (rt *runtime) await(ctx context.Context, w *permWaiter) (acp.RequestPermissionResponse, error) {
	select {
	case resp := <-w.answer:
		return resp, nil
	case <-ctx.Done():
		if rt.detached.Load() {
			// The daemon let go of the agent: the next one asks again.
			return acp.Cancelled(), nil
		}
		// The agent's connection is closing: nobody will read an answer.
		_, _ = rt.decide(context.WithoutCancel(ctx), w.p.ID, berth.PermissionCanceled, "", berth.DecidedByCancel)
		return acp.Cancelled(), nil
	}
}

// adoptLocked finds the stored pending permission a reattached agent's
// request asked for before the restart: same turn, same tool call.
func (rt *runtime) adoptLocked(p berth.Permission) (berth.Permission, bool) {
	for i, old := range rt.adoptable {
		if old.TurnID == p.TurnID && jsonEqual(old.ToolCall, p.ToolCall) {
			rt.adoptable = append(rt.adoptable[:i], rt.adoptable[i+1:]...)
			return old, true
		}
	}
	return berth.Permission{}, false
}

// dropAdoptableLocked takes out the stored pending permissions of a
// turn that is ending which the agent never asked again after a reattach,
// logging them resolved (cancelled) before turn_ended; the caller records
// them canceled.
func (rt *runtime) dropAdoptableLocked(turnID string) []berth.Permission {
	var out []berth.Permission
	kept := rt.adoptable[:0]
	for _, p := range rt.adoptable {
		if p.TurnID != turnID {
			kept = append(kept, p)
			continue
		}
		out = append(out, p)
		rt.emit(turnID, berth.EventPermissionResolved, resolvedData{PermissionID: p.ID, DecidedBy: berth.DecidedByCancel})
	}
	rt.adoptable = kept
	return out
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// settle records a decision taken without waiting and returns the answer.
func (rt *runtime) settle(ctx context.Context, p *berth.Permission, state, optionID, by string, remembered bool) (acp.RequestPermissionResponse, error) {
	if optionID == "" && state == berth.PermissionDecided {
		// No option fits the decision: the only safe answer is cancelled.
		state = berth.PermissionCanceled
	}
	now := time.Now().UTC()
	p.State, p.OptionID, p.DecidedBy, p.DecidedAt = state, optionID, by, &now
	if err := rt.h.store.DecidePermission(context.WithoutCancel(ctx), p); err != nil {
		rt.logger.Warn("record permission decision", "err", err)
	}
	rt.h.observer.PermissionDecided(by, now.Sub(p.CreatedAt))
	rt.mu.Lock()
	rt.emit(rt.turnTagLocked(p.TurnID), berth.EventPermissionResolved, resolvedData{PermissionID: p.ID, OptionID: optionID,
		DecidedBy: by, Remembered: remembered})
	rt.mu.Unlock()
	rt.flushBeforeAnswer(ctx)
	return answerFor(p), nil
}

// flushBeforeAnswer waits until the permission's events are committed:
// once the agent has its answer, a daemon that dies cannot lose them (the
// shim counts the request answered and never has it served again).
func (rt *runtime) flushBeforeAnswer(ctx context.Context) {
	if rt.shim == nil {
		return
	}
	if err := rt.h.log.FlushSession(context.WithoutCancel(ctx), rt.id); err != nil {
		rt.logger.Warn("flush before a permission answer", "err", err)
	}
}

// turnTagLocked is the turn id an event about turnID carries: turnID while
// that turn is in flight, "" once it has ended (turn_ended stays the
// turn's last event).
func (rt *runtime) turnTagLocked(turnID string) string {
	if rt.turn != nil && rt.turn.id == turnID {
		return turnID
	}
	return ""
}

// answerFor is the ACP answer for a decided permission.
func answerFor(p *berth.Permission) acp.RequestPermissionResponse {
	if p.State == berth.PermissionCanceled || p.OptionID == "" {
		return acp.Cancelled()
	}
	return acp.Selected(p.OptionID)
}

// decide resolves a waiting request once: the first decider wins, later
// ones get conflict. The record is written before the agent hears.
func (rt *runtime) decide(ctx context.Context, permID, state, optionID, by string) (*berth.Permission, error) {
	// Held from the resolved event to the record: a detach waits for the pair.
	rt.recordMu.RLock()
	defer rt.recordMu.RUnlock()
	rt.mu.Lock()
	p, w, err := rt.resolveLocked(permID, state, optionID, by)
	rt.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rt.complete(ctx, p, w)
	return p, nil
}

// resolveLocked takes a waiting request out of the waiters and logs its
// resolution; complete then records it and answers the agent.
func (rt *runtime) resolveLocked(permID, state, optionID, by string) (*berth.Permission, *permWaiter, error) {
	w := rt.perms[permID]
	if w == nil {
		return nil, nil, berth.Errorf(berth.EConflict, "permission %s is not awaiting a decision", permID)
	}
	delete(rt.perms, permID)
	rt.sess.PendingPermissions--
	rt.changedLocked()
	if w.timer != nil && w.timer.Stop() {
		rt.wg.Done()
	}
	if by == berth.DecidedByUser && w.toolKind != "" {
		for _, o := range w.p.Options {
			if o.ID == optionID && (o.Kind == berth.DecisionAllowAlways || o.Kind == berth.DecisionRejectAlways) {
				rt.remembered[w.toolKind] = o.Kind
			}
		}
	}
	if state == berth.PermissionDecided && optionID == "" {
		state = berth.PermissionCanceled
	}
	now := time.Now().UTC()
	p := w.p
	p.State, p.OptionID, p.DecidedBy, p.DecidedAt = state, optionID, by, &now
	rt.emit(rt.turnTagLocked(p.TurnID), berth.EventPermissionResolved, resolvedData{PermissionID: p.ID, OptionID: optionID, DecidedBy: by})
	return &p, w, nil
}

// complete records a resolved request and answers the agent.
func (rt *runtime) complete(ctx context.Context, p *berth.Permission, w *permWaiter) {
	if rt.detached.Load() {
		// The question stays pending for the next daemon.
		w.answer <- answerFor(p)
		return
	}
	if err := rt.h.store.DecidePermission(ctx, p); err != nil {
		rt.logger.Warn("record permission decision", "err", err)
	}
	if p.DecidedAt != nil {
		rt.h.observer.PermissionDecided(p.DecidedBy, p.DecidedAt.Sub(p.CreatedAt))
	}
	rt.flushBeforeAnswer(ctx)
	w.answer <- answerFor(p)
}

// resolveTurnLocked answers cancelled every request still waiting in a
// turn that is ending; the caller completes them once rt.mu is released.
func (rt *runtime) resolveTurnLocked(turnID string) (ps []*berth.Permission, ws []*permWaiter) {
	for id, w := range rt.perms {
		if w.p.TurnID != turnID {
			continue
		}
		if p, w, err := rt.resolveLocked(id, berth.PermissionCanceled, "", berth.DecidedByCancel); err == nil {
			ps, ws = append(ps, p), append(ws, w)
		}
	}
	return ps, ws
}

// expirePermission rejects a request nobody answered in time.
func (rt *runtime) expirePermission(permID string) {
	rt.mu.Lock()
	w := rt.perms[permID]
	rt.mu.Unlock()
	if w == nil {
		return
	}
	opt := ""
	for _, o := range w.p.Options {
		if o.Kind == berth.DecisionRejectOnce {
			opt = o.ID
		}
	}
	if opt == "" {
		for _, o := range w.p.Options {
			if o.Kind == berth.DecisionRejectAlways {
				opt = o.ID
			}
		}
	}
	state := berth.PermissionExpired
	if _, err := rt.decide(context.Background(), permID, state, opt, berth.DecidedByTimeout); err != nil && !berth.IsCode(err, berth.EConflict) {
		rt.logger.Warn("expire permission", "err", err)
	}
}

// cancelPermissionsLocked answers every waiting request of the session
// cancelled. The answers go out on their own goroutines: the waiters'
// records are written outside rt.mu.
func (rt *runtime) cancelPermissionsLocked() {
	for id := range rt.perms {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			_, _ = rt.decide(context.Background(), id, berth.PermissionCanceled, "", berth.DecidedByCancel)
		}()
	}
}

// pickOption returns the id of the option a policy decision selects: a
// one-time choice before a permanent one.
func pickOption(opts []acp.PermissionOption, allow bool) string {
	order := []string{berth.DecisionRejectOnce, berth.DecisionRejectAlways}
	if allow {
		order = []string{berth.DecisionAllowOnce, berth.DecisionAllowAlways}
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

// ListPermissions implements berth.SessionService.
func (m *Manager) ListPermissions(ctx context.Context, id, state string) ([]*berth.Permission, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	switch state {
	case "", berth.PermissionPending, berth.PermissionDecided, berth.PermissionExpired, berth.PermissionCanceled:
	default:
		return nil, berth.Errorf(berth.EInvalid, "state must be one of pending, decided, expired, canceled")
	}
	ps, err := m.store.ListPermissions(ctx, id, state)
	if ps == nil && err == nil {
		ps = []*berth.Permission{}
	}
	return ps, err
}

// DecidePermission implements berth.SessionService.
func (m *Manager) DecidePermission(ctx context.Context, id, permID string, d berth.PermissionDecision) (*berth.Permission, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	p, err := m.store.GetPermission(ctx, id, permID)
	if err != nil {
		return nil, err
	}
	if p.State != berth.PermissionPending {
		return nil, &berth.Error{Code: berth.EConflict, Message: "permission " + permID + " is already " + p.State,
			Details: map[string]any{"state": p.State, "decided_by": p.DecidedBy}}
	}
	opt, err := d.Option(p)
	if err != nil {
		return nil, err
	}
	rt := m.runtimeOf(id)
	if rt == nil {
		return nil, berth.Errorf(berth.EConflict, "permission %s is not awaiting a decision: the session is stopped", permID)
	}
	return rt.decide(context.WithoutCancel(ctx), permID, berth.PermissionDecided, opt.ID, berth.DecidedByUser)
}
