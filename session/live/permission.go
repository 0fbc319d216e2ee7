package live

import (
	"context"
	"encoding/json"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// Permission requests as API objects (docs/api.md, Permissions): one of
// the session's asks (asks.go). Each request is stored, logged as
// permission_requested, and then answered by the session's policy, by a
// decision the user gave earlier for the same tool kind (allow_always,
// reject_always), or, in ask mode and for approve-reads' non-read kinds, by
// whoever comes first of the user, the timeout and a cancel. Every request
// waits on its own goroutine (the ACP connection serves each inbound
// request on one), so a question pending in one session holds up nothing
// else, not even the same session's stream of updates.

// permWaiter is a permission request waiting for a decision.
type permWaiter struct {
	p        berth.Permission
	toolKind string
	answer   chan acp.RequestPermissionResponse // buffered: the decider never blocks
	timer    *time.Timer
}

// ResolvedData is the data of permission_resolved.
type ResolvedData struct {
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
	return h.ls.asks.requestPermission(ctx, req)
}

// requestPermission is RequestPermission.
func (a *asks) requestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return a.request(ctx, req, req.ToolCallKind())
}

// request asks req; kind is the tool kind its decision is remembered
// under and approve-reads reads, "" for a question never remembered nor
// taken for a read (a network ask: network.go).
func (a *asks) request(ctx context.Context, req acp.RequestPermissionRequest, kind string) (acp.RequestPermissionResponse, error) {
	ls := a.ls
	p := berth.Permission{ID: ids.New("perm"), SessionID: ls.id, ToolCall: req.ToolCall,
		Options: []berth.PermissionOption{}, State: berth.PermissionPending, CreatedAt: time.Now().UTC()}
	for _, o := range req.Options {
		p.Options = append(p.Options, berth.PermissionOption{ID: o.OptionID, Name: o.Name, Kind: o.Kind})
	}
	if len(p.ToolCall) == 0 || !json.Valid(p.ToolCall) {
		p.ToolCall = json.RawMessage(`{}`)
	}

	ls.mu.Lock()
	p.TurnID = ls.turns.currentIDLocked()
	if old, ok := a.adoptLocked(p); ok {
		// Asked before the daemon restarted: the record and its event exist.
		w := &permWaiter{p: old, toolKind: kind, answer: make(chan acp.RequestPermissionResponse, 1)}
		a.waitLocked(w)
		ls.mu.Unlock()
		return a.await(ctx, w)
	}
	a.arriveLocked(p.ID)
	ls.mu.Unlock()
	// The record exists before anyone can see the request.
	if !a.beginRecord("permission", func() error { return ls.h.Store.CreatePermission(context.WithoutCancel(ctx), &p) }) {
		ls.mu.Lock()
		a.arrivedLocked(p.ID)
		ls.mu.Unlock()
		return acp.Cancelled(), nil
	}
	ls.mu.Lock()
	// A decider waiting on the arrival runs once ls.mu is let go: by then
	// the request waits, or its settled record is on its way.
	a.arrivedLocked(p.ID)
	tag := a.turnTagLocked(p.TurnID)
	cancelled := a.movedOnLocked(p.TurnID, tag)
	mode, remembered := ls.sess.PermissionMode, a.remembered[kind]
	ls.Emit(tag, berth.EventPermissionRequested, map[string]any{"permission": p})
	ls.recordMu.RUnlock()
	switch {
	case cancelled:
		ls.mu.Unlock()
		return a.settle(ctx, &p, berth.PermissionCanceled, "", berth.DecidedByCancel, false)
	case remembered != "":
		ls.mu.Unlock()
		opt := pickOption(req.Options, remembered == berth.DecisionAllowAlways)
		return a.settle(ctx, &p, berth.PermissionDecided, opt, berth.DecidedByPolicy, true)
	case mode == berth.PermDenyAll, mode == berth.PermApproveAll:
		ls.mu.Unlock()
		return a.settle(ctx, &p, berth.PermissionDecided, pickOption(req.Options, mode == berth.PermApproveAll), berth.DecidedByPolicy, false)
	case mode == berth.PermApproveReads && readKinds[kind]:
		ls.mu.Unlock()
		return a.settle(ctx, &p, berth.PermissionDecided, pickOption(req.Options, true), berth.DecidedByPolicy, false)
	}

	// Ask, or approve-reads for anything but a read (docs/api.md,
	// Permissions): wait for the user, the timeout, a cancel or the
	// connection's end.
	w := &permWaiter{p: p, toolKind: kind, answer: make(chan acp.RequestPermissionResponse, 1)}
	a.waitLocked(w)
	ls.mu.Unlock()
	return a.await(ctx, w)
}

// waitLocked makes w a request waiting for a decision, with its timeout.
func (a *asks) waitLocked(w *permWaiter) {
	ls := a.ls
	id := w.p.ID
	a.perms[id] = w
	ls.sess.PendingPermissions++
	ls.changedLocked()
	ls.wg.Add(1)
	w.timer = time.AfterFunc(ls.h.Limits.PermissionTimeout, func() {
		defer ls.wg.Done()
		a.expire(id)
	})
}

// await waits for w's decision or the end of the agent's connection.
func (a *asks) await(ctx context.Context, w *permWaiter) (acp.RequestPermissionResponse, error) {
	select {
	case resp := <-w.answer:
		return resp, nil
	case <-ctx.Done():
		if a.ls.detached.Load() {
			// The daemon let go of the agent: the next one asks again.
			return acp.Cancelled(), nil
		}
		// The agent's connection is closing: nobody will read an answer.
		_, _ = a.decide(context.WithoutCancel(ctx), w.p.ID, berth.PermissionCanceled, "", berth.DecidedByCancel)
		return acp.Cancelled(), nil
	}
}

// adoptLocked finds the stored pending permission a reattached agent's
// request asked for before the restart: same turn, same tool call.
func (a *asks) adoptLocked(p berth.Permission) (berth.Permission, bool) {
	for i, old := range a.adoptable {
		if old.TurnID == p.TurnID && jsonEqual(old.ToolCall, p.ToolCall) {
			a.adoptable = append(a.adoptable[:i], a.adoptable[i+1:]...)
			return old, true
		}
	}
	return berth.Permission{}, false
}

// dropAdoptableLocked takes out the stored pending permissions of a
// turn that is ending which the agent never asked again after a reattach,
// logging them resolved (cancelled) before turn_ended; the caller records
// them canceled.
func (a *asks) dropAdoptableLocked(turnID string) []berth.Permission {
	ls := a.ls
	var out []berth.Permission
	kept := a.adoptable[:0]
	for _, p := range a.adoptable {
		if p.TurnID != turnID {
			kept = append(kept, p)
			continue
		}
		out = append(out, p)
		ls.Emit(turnID, berth.EventPermissionResolved, ResolvedData{PermissionID: p.ID, DecidedBy: berth.DecidedByCancel})
	}
	a.adoptable = kept
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
func (a *asks) settle(ctx context.Context, p *berth.Permission, state, optionID, by string, remembered bool) (acp.RequestPermissionResponse, error) {
	ls := a.ls
	if optionID == "" && state == berth.PermissionDecided {
		// No option fits the decision: the only safe answer is cancelled.
		state = berth.PermissionCanceled
	}
	now := time.Now().UTC()
	p.State, p.OptionID, p.DecidedBy, p.DecidedAt = state, optionID, by, &now
	if err := ls.h.Store.DecidePermission(context.WithoutCancel(ctx), p); err != nil {
		ls.logger.Warn("record permission decision", "err", err)
	}
	ls.h.Observer.PermissionDecided(by, now.Sub(p.CreatedAt))
	ls.mu.Lock()
	ls.Emit(a.turnTagLocked(p.TurnID), berth.EventPermissionResolved, ResolvedData{PermissionID: p.ID, OptionID: optionID,
		DecidedBy: by, Remembered: remembered})
	ls.mu.Unlock()
	a.flushBeforeAnswer(ctx)
	return answerFor(p), nil
}

// answerFor is the ACP answer for a decided permission.
func answerFor(p *berth.Permission) acp.RequestPermissionResponse {
	if p.State == berth.PermissionCanceled || p.OptionID == "" {
		return acp.Cancelled()
	}
	return acp.Selected(p.OptionID)
}

// Decide resolves a waiting request once: the first decider wins, later
// ones get conflict. The record is written before the agent hears.
func (ls *Session) Decide(ctx context.Context, permID, state, optionID, by string) (*berth.Permission, error) {
	if err := ls.asks.awaitArrival(ctx, permID); err != nil {
		return nil, err
	}
	return ls.asks.decide(ctx, permID, state, optionID, by)
}

// decide is Decide.
func (a *asks) decide(ctx context.Context, permID, state, optionID, by string) (*berth.Permission, error) {
	ls := a.ls
	// Held from the resolved event to the record: a detach waits for the pair.
	ls.recordMu.RLock()
	defer ls.recordMu.RUnlock()
	ls.mu.Lock()
	p, w, err := a.resolveLocked(permID, state, optionID, by)
	ls.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a.complete(ctx, p, w)
	return p, nil
}

// resolveLocked takes a waiting request out of the waiters and logs its
// resolution; complete then records it and answers the agent.
func (a *asks) resolveLocked(permID, state, optionID, by string) (*berth.Permission, *permWaiter, error) {
	ls := a.ls
	w := a.perms[permID]
	if w == nil {
		return nil, nil, berth.Errorf(berth.EConflict, "permission %s is not awaiting a decision", permID)
	}
	delete(a.perms, permID)
	ls.sess.PendingPermissions--
	ls.changedLocked()
	if w.timer != nil && w.timer.Stop() {
		ls.wg.Done()
	}
	if by == berth.DecidedByUser && w.toolKind != "" {
		for _, o := range w.p.Options {
			if o.ID == optionID && (o.Kind == berth.DecisionAllowAlways || o.Kind == berth.DecisionRejectAlways) {
				a.remembered[w.toolKind] = o.Kind
			}
		}
	}
	if state == berth.PermissionDecided && optionID == "" {
		state = berth.PermissionCanceled
	}
	now := time.Now().UTC()
	p := w.p
	p.State, p.OptionID, p.DecidedBy, p.DecidedAt = state, optionID, by, &now
	ls.Emit(a.turnTagLocked(p.TurnID), berth.EventPermissionResolved, ResolvedData{PermissionID: p.ID, OptionID: optionID, DecidedBy: by})
	return &p, w, nil
}

// complete records a resolved request and answers the agent.
func (a *asks) complete(ctx context.Context, p *berth.Permission, w *permWaiter) {
	ls := a.ls
	if ls.detached.Load() {
		// The question stays pending for the next daemon.
		w.answer <- answerFor(p)
		return
	}
	if err := ls.h.Store.DecidePermission(ctx, p); err != nil {
		ls.logger.Warn("record permission decision", "err", err)
	}
	if p.DecidedAt != nil {
		ls.h.Observer.PermissionDecided(p.DecidedBy, p.DecidedAt.Sub(p.CreatedAt))
	}
	a.flushBeforeAnswer(ctx)
	w.answer <- answerFor(p)
}

// resolveTurnLocked answers cancelled every request still waiting in a
// turn that is ending; the caller completes them once ls.mu is released.
func (a *asks) resolveTurnLocked(turnID string) (ps []*berth.Permission, ws []*permWaiter) {
	for id, w := range a.perms {
		if w.p.TurnID != turnID {
			continue
		}
		if p, w, err := a.resolveLocked(id, berth.PermissionCanceled, "", berth.DecidedByCancel); err == nil {
			ps, ws = append(ps, p), append(ws, w)
		}
	}
	return ps, ws
}

// expire rejects a request nobody answered in time.
func (a *asks) expire(permID string) {
	ls := a.ls
	ls.mu.Lock()
	w := a.perms[permID]
	ls.mu.Unlock()
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
	if _, err := a.decide(context.Background(), permID, berth.PermissionExpired, opt, berth.DecidedByTimeout); err != nil && !berth.IsCode(err, berth.EConflict) {
		ls.logger.Warn("expire permission", "err", err)
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
