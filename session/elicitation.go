package session

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/elicitschema"
	"github.com/berth-sh/berth/internal/ids"
)

// Elicitations as API objects (CONTRACT §4.7), built like permissions
// (permission.go): each elicitation/create is checked, stored, logged as
// elicitation_requested and then waits, on the goroutine the ACP
// connection serves it on, for the user's answer, a cancel of its turn or
// the end of the agent's connection. There is no timeout: a form may take
// a person a while, and the turn's stall watch and the idle reaper leave a
// session alone while one waits.

// elicWaiter is an elicitation waiting for an answer.
type elicWaiter struct {
	e      berth.Elicitation
	form   *elicitschema.Form
	answer chan acp.CreateElicitationResponse // buffered: the resolver never blocks
}

// elicResolvedData is the data of elicitation_resolved.
type elicResolvedData struct {
	ElicitationID string         `json:"elicitation_id"`
	Action        string         `json:"action"`
	Content       map[string]any `json:"content,omitempty"`
	DecidedBy     string         `json:"decided_by"`
}

// CreateElicitation serves the agent's elicitation/create; see above.
func (h *agentHandler) CreateElicitation(ctx context.Context, req acp.CreateElicitationRequest) (acp.CreateElicitationResponse, error) {
	rt := h.rt
	e, form, err := elicitationOf(rt.id, req)
	if err != nil {
		return acp.CreateElicitationResponse{}, &acp.Error{Code: acp.CodeInvalidParams, Message: err.Error()}
	}
	rt.mu.Lock()
	e.TurnID = rt.currentTurnIDLocked()
	if old, ok := rt.adoptElicitationLocked(e); ok {
		// Asked before the daemon restarted: the record and its event exist.
		w := &elicWaiter{e: old, form: form, answer: make(chan acp.CreateElicitationResponse, 1)}
		rt.waitElicitationLocked(w)
		rt.mu.Unlock()
		return rt.awaitElicitation(ctx, w)
	}
	// Requests on their way in count against the cap too: an agent
	// sending many at once cannot slip past it.
	if len(rt.elics)+rt.elicsArriving >= berth.MaxPendingElicitations {
		rt.mu.Unlock()
		return acp.CreateElicitationResponse{}, &acp.Error{Code: acp.CodeInvalidRequest,
			Message: "too many elicitations wait for an answer in this session"}
	}
	rt.elicsArriving++
	rt.mu.Unlock()
	arrived := false
	defer func() {
		if !arrived {
			rt.mu.Lock()
			rt.elicsArriving--
			rt.mu.Unlock()
		}
	}()
	// Held until the event is logged: a detach waits for the pair.
	rt.recordMu.RLock()
	if rt.detached.Load() {
		rt.recordMu.RUnlock()
		// The daemon let go of the agent: the next one is asked.
		return acp.ElicitationCancelled(), nil
	}
	// The record exists before anyone can see the request.
	if err := rt.h.store.CreateElicitation(context.WithoutCancel(ctx), &e); err != nil {
		rt.recordMu.RUnlock()
		rt.logger.Error("store elicitation", "err", err)
		return acp.ElicitationCancelled(), nil
	}
	rt.mu.Lock()
	// A cancel, a stop or the end of the turn while the record was written
	// answers the request at once.
	tag := rt.turnTagLocked(e.TurnID)
	cancelled := rt.exited || rt.stopReason != "" || (e.TurnID != "" && tag == "") ||
		(rt.turn != nil && rt.turn.id == e.TurnID && rt.turn.cancelRequested)
	rt.emit(tag, berth.EventElicitationRequested, map[string]any{"elicitation": e})
	rt.recordMu.RUnlock()
	w := &elicWaiter{e: e, form: form, answer: make(chan acp.CreateElicitationResponse, 1)}
	rt.waitElicitationLocked(w)
	rt.elicsArriving--
	arrived = true
	rt.mu.Unlock()
	if cancelled {
		_, _ = rt.resolveElicitation(context.WithoutCancel(ctx), e.ID, berth.ElicitationCancel, nil, berth.DecidedByCancel)
	}
	return rt.awaitElicitation(ctx, w)
}

// elicitationOf builds the API object of a request, checking it: a known
// mode, a bounded message, a form's schema (elicitschema.Parse), a URL
// of http or https.
func elicitationOf(sessionID string, req acp.CreateElicitationRequest) (berth.Elicitation, *elicitschema.Form, error) {
	e := berth.Elicitation{ID: ids.New("elic"), SessionID: sessionID, Mode: req.Mode, Message: req.Message,
		ToolCallID: req.ToolCallID, State: berth.ElicitationPending, CreatedAt: time.Now().UTC()}
	if len(req.Message) > berth.MaxElicitationMessageBytes {
		return e, nil, berth.Errorf(berth.ETooLarge, "elicitation message over %d bytes", berth.MaxElicitationMessageBytes)
	}
	// Kept in the record, its events and every list: bounded like the message.
	if len(req.URL) > berth.MaxElicitationURLBytes {
		return e, nil, berth.Errorf(berth.ETooLarge, "elicitation url over %d bytes", berth.MaxElicitationURLBytes)
	}
	if len(req.ElicitationID) > berth.MaxElicitationIDBytes || len(req.ToolCallID) > berth.MaxElicitationIDBytes {
		return e, nil, berth.Errorf(berth.ETooLarge, "elicitation id or tool call id over %d bytes", berth.MaxElicitationIDBytes)
	}
	switch req.Mode {
	case berth.ElicitationModeForm:
		schema := req.RequestedSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		form, err := elicitschema.Parse(schema)
		if err != nil {
			return e, nil, err
		}
		e.RequestedSchema = schema
		return e, form, nil
	case berth.ElicitationModeURL:
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return e, nil, berth.Errorf(berth.EInvalid, "elicitation url must be an http or https URL")
		}
		e.URL, e.ACPElicitationID = req.URL, req.ElicitationID
		return e, nil, nil
	}
	return e, nil, berth.Errorf(berth.EInvalid, "elicitation mode must be form or url, not %q", req.Mode)
}

// waitElicitationLocked makes w an elicitation waiting for an answer.
func (rt *runtime) waitElicitationLocked(w *elicWaiter) {
	if rt.elics == nil {
		rt.elics = map[string]*elicWaiter{}
	}
	rt.elics[w.e.ID] = w
	rt.sess.PendingElicitations++
	rt.changedLocked()
}

// awaitElicitation waits for w's answer or the end of the agent's
// connection.
func (rt *runtime) awaitElicitation(ctx context.Context, w *elicWaiter) (acp.CreateElicitationResponse, error) {
	select {
	case resp := <-w.answer:
		return resp, nil
	case <-ctx.Done():
		if rt.detached.Load() {
			// The daemon let go of the agent: the next one asks again.
			return acp.ElicitationCancelled(), nil
		}
		// The agent's connection is closing: nobody will read an answer.
		_, _ = rt.resolveElicitation(context.WithoutCancel(ctx), w.e.ID, berth.ElicitationCancel, nil, berth.DecidedByCancel)
		return acp.ElicitationCancelled(), nil
	}
}

// resolveElicitation answers a waiting elicitation once: the first
// resolver wins, later ones get conflict. The record is written before
// the agent hears.
func (rt *runtime) resolveElicitation(ctx context.Context, eid, action string, content map[string]any, by string) (*berth.Elicitation, error) {
	// Held from the resolved event to the record: a detach waits for the pair.
	rt.recordMu.RLock()
	defer rt.recordMu.RUnlock()
	rt.mu.Lock()
	e, w, err := rt.resolveElicitationLocked(eid, action, content, by)
	rt.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rt.completeElicitation(ctx, e, w)
	return e, nil
}

// resolveElicitationLocked takes a waiting elicitation out of the waiters
// and logs its resolution; completeElicitation then records it and
// answers the agent.
func (rt *runtime) resolveElicitationLocked(eid, action string, content map[string]any, by string) (*berth.Elicitation, *elicWaiter, error) {
	w := rt.elics[eid]
	if w == nil {
		return nil, nil, berth.Errorf(berth.EConflict, "elicitation %s is not awaiting an answer", eid)
	}
	delete(rt.elics, eid)
	rt.sess.PendingElicitations--
	rt.changedLocked()
	now := time.Now().UTC()
	e := w.e
	e.State, e.Action, e.Content, e.DecidedBy, e.ResolvedAt = berth.ElicitationStateOf(action), action, content, by, &now
	rt.emit(rt.turnTagLocked(e.TurnID), berth.EventElicitationResolved,
		elicResolvedData{ElicitationID: e.ID, Action: action, Content: content, DecidedBy: by})
	return &e, w, nil
}

// completeElicitation records a resolved elicitation and answers the agent.
func (rt *runtime) completeElicitation(ctx context.Context, e *berth.Elicitation, w *elicWaiter) {
	resp := acp.CreateElicitationResponse{Action: e.Action, Content: e.Content}
	if rt.detached.Load() {
		// The question stays pending for the next daemon.
		w.answer <- resp
		return
	}
	if err := rt.h.store.ResolveElicitation(ctx, e); err != nil {
		rt.logger.Warn("record elicitation answer", "err", err)
	}
	rt.flushBeforeAnswer(ctx)
	w.answer <- resp
}

// cancelElicitationsLocked answers every waiting elicitation of the
// session cancel, each on its own goroutine (the records are written
// outside rt.mu).
func (rt *runtime) cancelElicitationsLocked() {
	for id := range rt.elics {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			_, _ = rt.resolveElicitation(context.Background(), id, berth.ElicitationCancel, nil, berth.DecidedByCancel)
		}()
	}
}

// endTurnElicitationsLocked resolves, cancelled, the elicitations of a
// turn that is ending, and drops those a previous daemon stored that the
// agent never asked again (logging them resolved); the returned func,
// called once rt.mu is released, records them and answers the agent.
func (rt *runtime) endTurnElicitationsLocked(turnID string) func() {
	var es []*berth.Elicitation
	var ws []*elicWaiter
	for id, w := range rt.elics {
		if w.e.TurnID != turnID {
			continue
		}
		if e, w, err := rt.resolveElicitationLocked(id, berth.ElicitationCancel, nil, berth.DecidedByCancel); err == nil {
			es, ws = append(es, e), append(ws, w)
		}
	}
	var stale []berth.Elicitation
	kept := rt.adoptableElics[:0]
	for _, e := range rt.adoptableElics {
		if e.TurnID != turnID {
			kept = append(kept, e)
			continue
		}
		stale = append(stale, e)
		rt.emit(turnID, berth.EventElicitationResolved, elicResolvedData{ElicitationID: e.ID,
			Action: berth.ElicitationCancel, DecidedBy: berth.DecidedByCancel})
	}
	rt.adoptableElics = kept
	return func() {
		for i, e := range es {
			rt.completeElicitation(context.Background(), e, ws[i])
		}
		for i := range stale {
			rt.h.cancelStoredElicitation(context.Background(), &stale[i])
		}
	}
}

// cancelStoredElicitation records a stored pending elicitation cancelled.
func (m *Manager) cancelStoredElicitation(ctx context.Context, e *berth.Elicitation) {
	now := time.Now().UTC()
	e.State, e.Action, e.DecidedBy, e.ResolvedAt = berth.ElicitationCancelled, berth.ElicitationCancel, berth.DecidedByCancel, &now
	if err := m.store.ResolveElicitation(ctx, e); err != nil && !berth.IsCode(err, berth.EConflict) {
		m.logger.Warn("cancel a stale elicitation", "err", err)
	}
}

// adoptElicitationLocked finds the stored pending elicitation a reattached
// agent's request asked for before the restart: same turn, mode, message
// and schema or URL.
func (rt *runtime) adoptElicitationLocked(e berth.Elicitation) (berth.Elicitation, bool) {
	for i, old := range rt.adoptableElics {
		if old.TurnID == e.TurnID && old.Mode == e.Mode && old.Message == e.Message && old.URL == e.URL &&
			(old.Mode != berth.ElicitationModeForm || jsonEqual(old.RequestedSchema, e.RequestedSchema)) {
			rt.adoptableElics = append(rt.adoptableElics[:i], rt.adoptableElics[i+1:]...)
			return old, true
		}
	}
	return berth.Elicitation{}, false
}

// reconcileElicitations cancels the pending elicitations of a session
// whose agent died with the daemon, logging them resolved (tagged with
// the open turn when they belong to it) unless the log is closed already.
func (m *Manager) reconcileElicitations(ctx context.Context, s *berth.Session, open string, ended bool) error {
	pending, err := m.store.ListElicitations(ctx, s.ID, berth.ElicitationPending)
	if err != nil {
		return err
	}
	for _, e := range pending {
		m.cancelStoredElicitation(ctx, e)
		if ended {
			continue
		}
		tag := ""
		if e.TurnID == open {
			tag = open
		}
		if _, err := m.log.AppendSync(ctx, berth.NewEvent(s.ID, tag, berth.EventElicitationResolved,
			elicResolvedData{ElicitationID: e.ID, Action: berth.ElicitationCancel, DecidedBy: berth.DecidedByCancel})); err != nil {
			return err
		}
	}
	s.PendingElicitations = 0
	return nil
}

// ListElicitations implements berth.SessionService.
func (m *Manager) ListElicitations(ctx context.Context, id, state string) ([]*berth.Elicitation, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	switch state {
	case "", berth.ElicitationPending, berth.ElicitationAccepted, berth.ElicitationDeclined, berth.ElicitationCancelled:
	default:
		return nil, berth.Errorf(berth.EInvalid, "state must be one of pending, accepted, declined, cancelled")
	}
	return m.store.ListElicitations(ctx, id, state)
}

// GetElicitation implements berth.SessionService.
func (m *Manager) GetElicitation(ctx context.Context, id, eid string) (*berth.Elicitation, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	return m.store.GetElicitation(ctx, id, eid)
}

// AnswerElicitation implements berth.SessionService: the answer is checked
// against the agent's schema before the agent hears it.
func (m *Manager) AnswerElicitation(ctx context.Context, id, eid string, a berth.ElicitationAnswer) (*berth.Elicitation, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	e, err := m.store.GetElicitation(ctx, id, eid)
	if err != nil {
		return nil, err
	}
	if e.State != berth.ElicitationPending {
		return nil, &berth.Error{Code: berth.EConflict, Message: "elicitation " + eid + " is already " + e.State,
			Details: map[string]any{"state": e.State, "decided_by": e.DecidedBy}}
	}
	if a.Action == berth.ElicitationAccept {
		switch e.Mode {
		case berth.ElicitationModeURL:
			if len(a.Content) > 0 {
				return nil, berth.Errorf(berth.EInvalid, "a url elicitation is accepted without content")
			}
		default:
			form, err := elicitschema.Parse(e.RequestedSchema)
			if err != nil {
				return nil, err
			}
			if a.Content == nil {
				a.Content = map[string]any{}
			}
			if err := form.Check(a.Content); err != nil {
				return nil, err
			}
		}
	}
	rt := m.runtimeOf(id)
	if rt == nil {
		return nil, berth.Errorf(berth.EConflict, "elicitation %s is not awaiting an answer: the session is stopped", eid)
	}
	return rt.resolveElicitation(context.WithoutCancel(ctx), eid, a.Action, a.Content, berth.DecidedByUser)
}
