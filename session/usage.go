package session

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
)

// usageWriteTimeout bounds the store write and the events of one model
// call told by the gateway.
const usageWriteTimeout = 30 * time.Second

// spendFresh is how long the spending and budgets of a session are taken
// from memory before the store is read again: another node's calls and
// PATCHes reach this one's admissions within it.
const spendFresh = 5 * time.Second

// costSlack absorbs the rounding of summed costs when a call's spending
// before it is told from the total after it, so that a budget reached
// by one call is never told reached again by the next.
const costSlack = 1e-9

// UsageObserver is told of every model call the gateway forwarded, with
// the session's agent (metrics). An Options.Observer that implements it
// is told.
type UsageObserver interface {
	ModelCalled(agent string, c gateway.Call)
}

// usage counts the sessions' model calls and keeps their budgets
// (docs/api.md, "Usage and budgets"): the store holds the truth, and
// memory the spending and budgets admissions check, so that one costs
// no store read while fresh.
type usage struct {
	m *Manager

	mu sync.Mutex
	// spends are the sessions' budgets and spending as last read or
	// written, by id.
	spends map[string]*spend
}

// spend is a session's budgets and its tree's spending.
type spend struct {
	agent, parent string
	// total is the session's tree's usage (Usage.Total).
	total     berth.Usage
	maxCost   *float64
	maxTokens *int64
	read      time.Time // when the store was read (zero: never whole)
	// patched is when a PATCH here last set the budgets: a store read
	// begun before it does not take them back.
	patched time.Time
}

// exceeded is the limit the spending reached and its value ("" for none).
func (sp *spend) exceeded() (string, float64) {
	s := berth.Session{Usage: sp.total, MaxCostUSD: sp.maxCost, MaxTokens: sp.maxTokens}
	return s.Exceeded()
}

// take keeps u as the spending unless it counts fewer calls than the one
// held: spending only grows, so the one with more calls is the later.
func (sp *spend) take(u berth.Usage) {
	if t := u.Total(); t.ModelCalls >= sp.total.ModelCalls {
		sp.total = t
	}
}

// lateTail bounds the events read back from a log's end to find its last
// one but the late model calls: more than the calls of one agent in
// flight at its stop.
const lateTail = 64

// lateAfterStop reports whether an event of type typ may follow a
// session's session_stopped: a model call that ended after the stop, and
// the budget it reached, are logged all the same (docs/api.md, Usage and
// budgets).
func lateAfterStop(typ string) bool {
	return typ == berth.EventModelCall || typ == berth.EventBudgetExceeded
}

// modelCallData is the model_call event of c, its counts never negative
// nor a cost that is not a number: the store would refuse the call.
func modelCallData(c gateway.Call) berth.ModelCallData {
	cost := c.CostUSD
	if !(cost > 0) || math.IsInf(cost, 0) {
		cost = 0
	}
	return berth.ModelCallData{Upstream: c.Upstream, Model: c.Model, Status: c.Status,
		InputTokens: max(c.InputTokens, 0), OutputTokens: max(c.OutputTokens, 0),
		CacheReadTokens: max(c.CacheReadTokens, 0), CacheWriteTokens: max(c.CacheWriteTokens, 0),
		CostUSD: cost, DurationMS: c.Duration.Milliseconds(), FirstByteMS: c.FirstByte.Milliseconds()}
}

// called counts a call the gateway forwarded (modelSessions.Called).
func (u *usage) called(ctx context.Context, id string, c gateway.Call) {
	m := u.m
	data := modelCallData(c)
	delta := data.Usage()
	rows, err := m.store.AddUsage(ctx, id, delta)
	if err != nil {
		if !berth.IsCode(err, berth.ENotFound) {
			m.logger.Warn("a model call was not counted", "session_id", id, "upstream", c.Upstream, "err", err)
		}
		return
	}
	turn := ""
	if ls := m.set.liveOf(id); ls != nil {
		turn = ls.View().CurrentTurnID
	}
	if err := m.log.Append(ctx, berth.NewEvent(id, turn, berth.EventModelCall, data)); err != nil {
		m.logger.Warn("model_call not logged", "session_id", id, "err", err)
	}
	if o, ok := m.opts.Observer.(UsageObserver); ok {
		o.ModelCalled(u.agentOf(ctx, id), c)
	}
	for _, r := range rows {
		u.counted(r)
		u.show(ctx, r)
		if limit, max, spent := reached(r, delta); limit != "" {
			u.exceeded(ctx, r.ID, limit, max, spent)
		}
	}
}

// counted keeps what the store answered of a session after a call.
func (u *usage) counted(r berth.SessionUsage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sp := u.spends[r.ID]
	if sp == nil {
		// Not whole (no agent): the next read of it fills it.
		sp = &spend{parent: r.ParentID}
		u.spends[r.ID] = sp
	}
	sp.take(r.Usage)
	if sp.read.IsZero() {
		// A whole spend's budgets come from reads and PATCHes alone: the
		// call's transaction may have read them before a PATCH's.
		sp.maxCost, sp.maxTokens = r.MaxCostUSD, r.MaxTokens
	}
}

// show shows a session's new usage: on its live session, which publishes
// it; a session not live here is published as the store has it.
func (u *usage) show(ctx context.Context, r berth.SessionUsage) {
	if ls := u.m.set.liveOf(r.ID); ls != nil {
		ls.SetUsage(r.Usage)
		return
	}
	s, err := u.m.store.GetSession(ctx, r.ID)
	if err != nil {
		return
	}
	u.m.changes.publishStored(berth.ChangeSessionUpdated, u.m.stored(s))
}

// reached says which budget of r the call of delta reached: the limit,
// its value and the spending; "" when the spending was already there
// before the call or is still below.
func reached(r berth.SessionUsage, delta berth.Usage) (limit string, max, spent float64) {
	after := r.Usage.Total()
	if r.MaxCostUSD != nil && after.CostUSD >= *r.MaxCostUSD && after.CostUSD-delta.CostUSD < *r.MaxCostUSD-costSlack {
		return berth.LimitCost, *r.MaxCostUSD, after.CostUSD
	}
	if r.MaxTokens != nil && after.Tokens() >= *r.MaxTokens && after.Tokens()-delta.Tokens() < *r.MaxTokens {
		return berth.LimitTokens, float64(*r.MaxTokens), float64(after.Tokens())
	}
	return "", 0, 0
}

// exceeded logs budget_exceeded on session id.
func (u *usage) exceeded(ctx context.Context, id, limit string, max, spent float64) {
	ev := berth.NewEvent(id, "", berth.EventBudgetExceeded, berth.BudgetExceededData{Limit: limit, Max: max, Spent: spent})
	if err := u.m.log.Append(ctx, ev); err != nil {
		u.m.logger.Warn("budget_exceeded not logged", "session_id", id, "err", err)
	}
}

// admit is modelSessions.Admit: the session, then each ancestor up to its
// root.
func (u *usage) admit(ctx context.Context, id string) error {
	cur := id
	for range maxTreeWalk {
		sp, err := u.spendOf(ctx, cur)
		if err != nil {
			return err
		}
		if limit, max := sp.exceeded(); limit != "" {
			if cur == id {
				return berth.BudgetSpent("", limit, max)
			}
			return berth.BudgetSpent(cur, limit, max)
		}
		if cur = sp.parent; cur == "" {
			return nil
		}
	}
	return nil
}

// spendOf is a copy of session id's spend, read from the store when what
// memory holds is not fresh.
func (u *usage) spendOf(ctx context.Context, id string) (spend, error) {
	u.mu.Lock()
	sp := u.spends[id]
	if sp != nil && time.Since(sp.read) < spendFresh {
		defer u.mu.Unlock()
		return *sp, nil
	}
	u.mu.Unlock()
	// Read with no lock held: a slow store stalls this call alone.
	began := time.Now()
	s, err := u.m.store.GetSession(ctx, id)
	if err != nil {
		return spend{}, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if sp = u.spends[id]; sp == nil {
		sp = &spend{}
		u.spends[id] = sp
	}
	sp.agent, sp.parent, sp.read = s.Agent, s.ParentID, time.Now()
	if !sp.patched.After(began) {
		sp.maxCost, sp.maxTokens = s.MaxCostUSD, s.MaxTokens
	}
	sp.take(s.Usage)
	return *sp, nil
}

// agentOf is session id's agent, "" when it cannot be read.
func (u *usage) agentOf(ctx context.Context, id string) string {
	u.mu.Lock()
	if sp := u.spends[id]; sp != nil && sp.agent != "" {
		defer u.mu.Unlock()
		return sp.agent
	}
	u.mu.Unlock()
	sp, err := u.spendOf(ctx, id)
	if err != nil {
		return ""
	}
	return sp.agent
}

// patched takes a session's budgets as a PATCH left them (s), from
// before (the spend held before it): raising a budget lets the next call
// through at once, and a budget lowered to what is already spent is
// reached then (budget_exceeded).
func (u *usage) patched(ctx context.Context, before spend, s *berth.Session) {
	u.mu.Lock()
	sp := u.spends[s.ID]
	if sp == nil {
		sp = &spend{}
		u.spends[s.ID] = sp
	}
	// s is the session as the PATCH left it: as good as a read.
	now := time.Now()
	sp.agent, sp.parent, sp.read = s.Agent, s.ParentID, now
	sp.maxCost, sp.maxTokens, sp.patched = s.MaxCostUSD, s.MaxTokens, now
	sp.take(s.Usage)
	after := *sp
	u.mu.Unlock()
	was, _ := before.exceeded()
	if limit, max := after.exceeded(); limit != "" && was == "" {
		spent := after.total.CostUSD
		if limit == berth.LimitTokens {
			spent = float64(after.total.Tokens())
		}
		u.exceeded(ctx, s.ID, limit, max, spent)
	}
}

// forget drops what memory holds of a deleted session.
func (u *usage) forget(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.spends, id)
}
