package live

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

// Elicitations as API objects (docs/api.md, Elicitations), the other of
// the session's asks (asks.go), built like permissions (permission.go): each elicitation/create is checked, stored, logged as
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

// ElicResolvedData is the data of elicitation_resolved.
type ElicResolvedData struct {
	ElicitationID string         `json:"elicitation_id"`
	Action        string         `json:"action"`
	Content       map[string]any `json:"content,omitempty"`
	DecidedBy     string         `json:"decided_by"`
}

// CreateElicitation serves the agent's elicitation/create; see above.
func (h *agentHandler) CreateElicitation(ctx context.Context, req acp.CreateElicitationRequest) (acp.CreateElicitationResponse, error) {
	return h.ls.asks.createElicitation(ctx, req)
}

// createElicitation is CreateElicitation.
func (a *asks) createElicitation(ctx context.Context, req acp.CreateElicitationRequest) (acp.CreateElicitationResponse, error) {
	ls := a.ls
	e, form, err := elicitationOf(ls.id, req)
	if err != nil {
		return acp.CreateElicitationResponse{}, &acp.Error{Code: acp.CodeInvalidParams, Message: err.Error()}
	}
	ls.mu.Lock()
	e.TurnID = ls.turns.currentIDLocked()
	if old, ok := a.adoptElicitationLocked(e); ok {
		// Asked before the daemon restarted: the record and its event exist.
		w := &elicWaiter{e: old, form: form, answer: make(chan acp.CreateElicitationResponse, 1)}
		a.waitElicitationLocked(w)
		ls.mu.Unlock()
		return a.awaitElicitation(ctx, w)
	}
	// Requests on their way in count against the cap too: an agent
	// sending many at once cannot slip past it.
	if len(a.elics)+a.elicsArriving >= berth.MaxPendingElicitations {
		ls.mu.Unlock()
		return acp.CreateElicitationResponse{}, &acp.Error{Code: acp.CodeInvalidRequest,
			Message: "too many elicitations wait for an answer in this session"}
	}
	a.elicsArriving++
	a.arriveLocked(e.ID)
	ls.mu.Unlock()
	arrived := false
	defer func() {
		if !arrived {
			ls.mu.Lock()
			a.elicsArriving--
			a.arrivedLocked(e.ID)
			ls.mu.Unlock()
		}
	}()
	// The record exists before anyone can see the request.
	if !a.beginRecord("elicitation", func() error { return ls.h.Store.CreateElicitation(context.WithoutCancel(ctx), &e) }) {
		return acp.ElicitationCancelled(), nil
	}
	ls.mu.Lock()
	tag := a.turnTagLocked(e.TurnID)
	cancelled := a.movedOnLocked(e.TurnID, tag)
	ls.Emit(tag, berth.EventElicitationRequested, map[string]any{"elicitation": e})
	ls.recordMu.RUnlock()
	w := &elicWaiter{e: e, form: form, answer: make(chan acp.CreateElicitationResponse, 1)}
	a.waitElicitationLocked(w)
	a.elicsArriving--
	a.arrivedLocked(e.ID)
	arrived = true
	ls.mu.Unlock()
	if cancelled {
		_, _ = a.resolveElicitation(context.WithoutCancel(ctx), e.ID, berth.ElicitationCancel, nil, berth.DecidedByCancel)
	}
	return a.awaitElicitation(ctx, w)
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
func (a *asks) waitElicitationLocked(w *elicWaiter) {
	ls := a.ls
	if a.elics == nil {
		a.elics = map[string]*elicWaiter{}
	}
	a.elics[w.e.ID] = w
	ls.sess.PendingElicitations++
	ls.changedLocked()
}

// awaitElicitation waits for w's answer or the end of the agent's
// connection.
func (a *asks) awaitElicitation(ctx context.Context, w *elicWaiter) (acp.CreateElicitationResponse, error) {
	select {
	case resp := <-w.answer:
		return resp, nil
	case <-ctx.Done():
		if a.ls.detached.Load() {
			// The daemon let go of the agent: the next one asks again.
			return acp.ElicitationCancelled(), nil
		}
		// The agent's connection is closing: nobody will read an answer.
		_, _ = a.resolveElicitation(context.WithoutCancel(ctx), w.e.ID, berth.ElicitationCancel, nil, berth.DecidedByCancel)
		return acp.ElicitationCancelled(), nil
	}
}

// ResolveElicitation answers a waiting elicitation once: the first
// resolver wins, later ones get conflict. The record is written before
// the agent hears.
func (ls *Session) ResolveElicitation(ctx context.Context, eid, action string, content map[string]any, by string) (*berth.Elicitation, error) {
	if err := ls.asks.awaitArrival(ctx, eid); err != nil {
		return nil, err
	}
	return ls.asks.resolveElicitation(ctx, eid, action, content, by)
}

// resolveElicitation is ResolveElicitation.
func (a *asks) resolveElicitation(ctx context.Context, eid, action string, content map[string]any, by string) (*berth.Elicitation, error) {
	ls := a.ls
	// Held from the resolved event to the record: a detach waits for the pair.
	ls.recordMu.RLock()
	defer ls.recordMu.RUnlock()
	ls.mu.Lock()
	e, w, err := a.resolveElicitationLocked(eid, action, content, by)
	ls.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a.completeElicitation(ctx, e, w)
	return e, nil
}

// resolveElicitationLocked takes a waiting elicitation out of the waiters
// and logs its resolution; completeElicitation then records it and
// answers the agent.
func (a *asks) resolveElicitationLocked(eid, action string, content map[string]any, by string) (*berth.Elicitation, *elicWaiter, error) {
	ls := a.ls
	w := a.elics[eid]
	if w == nil {
		return nil, nil, berth.Errorf(berth.EConflict, "elicitation %s is not awaiting an answer", eid)
	}
	delete(a.elics, eid)
	ls.sess.PendingElicitations--
	ls.changedLocked()
	now := time.Now().UTC()
	e := w.e
	e.State, e.Action, e.Content, e.DecidedBy, e.ResolvedAt = berth.ElicitationStateOf(action), action, content, by, &now
	ls.Emit(a.turnTagLocked(e.TurnID), berth.EventElicitationResolved,
		ElicResolvedData{ElicitationID: e.ID, Action: action, Content: content, DecidedBy: by})
	return &e, w, nil
}

// completeElicitation records a resolved elicitation and answers the agent.
func (a *asks) completeElicitation(ctx context.Context, e *berth.Elicitation, w *elicWaiter) {
	ls := a.ls
	resp := acp.CreateElicitationResponse{Action: e.Action, Content: e.Content}
	if ls.detached.Load() {
		// The question stays pending for the next daemon.
		w.answer <- resp
		return
	}
	if err := ls.h.Store.ResolveElicitation(ctx, e); err != nil {
		ls.logger.Warn("record elicitation answer", "err", err)
	}
	a.flushBeforeAnswer(ctx)
	w.answer <- resp
}

// resolveTurnElicitationsLocked resolves, cancelled, the elicitations
// still waiting in a turn that is ending; the caller completes them once
// ls.mu is released.
func (a *asks) resolveTurnElicitationsLocked(turnID string) (es []*berth.Elicitation, ws []*elicWaiter) {
	for id, w := range a.elics {
		if w.e.TurnID != turnID {
			continue
		}
		if e, w, err := a.resolveElicitationLocked(id, berth.ElicitationCancel, nil, berth.DecidedByCancel); err == nil {
			es, ws = append(es, e), append(ws, w)
		}
	}
	return es, ws
}

// dropAdoptableElicsLocked takes out the stored pending elicitations of a
// turn that is ending which the agent never asked again after a reattach,
// logging them resolved (cancelled) before turn_ended; the caller records
// them cancelled.
func (a *asks) dropAdoptableElicsLocked(turnID string) []berth.Elicitation {
	ls := a.ls
	var out []berth.Elicitation
	kept := a.adoptableElics[:0]
	for _, e := range a.adoptableElics {
		if e.TurnID != turnID {
			kept = append(kept, e)
			continue
		}
		out = append(out, e)
		ls.Emit(turnID, berth.EventElicitationResolved, ElicResolvedData{ElicitationID: e.ID,
			Action: berth.ElicitationCancel, DecidedBy: berth.DecidedByCancel})
	}
	a.adoptableElics = kept
	return out
}

// adoptElicitationLocked finds the stored pending elicitation a reattached
// agent's request asked for before the restart: same turn, mode, message
// and schema or URL.
func (a *asks) adoptElicitationLocked(e berth.Elicitation) (berth.Elicitation, bool) {
	for i, old := range a.adoptableElics {
		if old.TurnID == e.TurnID && old.Mode == e.Mode && old.Message == e.Message && old.URL == e.URL &&
			(old.Mode != berth.ElicitationModeForm || jsonEqual(old.RequestedSchema, e.RequestedSchema)) {
			a.adoptableElics = append(a.adoptableElics[:i], a.adoptableElics[i+1:]...)
			return old, true
		}
	}
	return berth.Elicitation{}, false
}
