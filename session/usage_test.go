package session

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/store/memory"
)

// modelCall is a call of n input and 2n output tokens costing cost.
func modelCall(n int64, cost float64) gateway.Call {
	return gateway.Call{Upstream: "anthropic", Model: "claude-test", Status: 200, InputTokens: n, OutputTokens: 2 * n,
		CacheReadTokens: 3, CostUSD: cost, Duration: 1500 * time.Millisecond, FirstByte: 200 * time.Millisecond}
}

// get reads a session or fails the test.
func (e *env) get(id string) *berth.Session {
	e.t.Helper()
	s, err := e.m.GetSession(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// admit asks the gateway's Admit of id.
func (e *env) admit(id string) error {
	return e.m.GatewaySessions().Admit(context.Background(), id, "anthropic")
}

// patchBudget changes a session's budgets or fails the test.
func (e *env) patchBudget(id string, p berth.SessionPatch) *berth.Session {
	e.t.Helper()
	s, err := e.m.PatchSession(context.Background(), id, p)
	if err != nil {
		e.t.Fatalf("patch %s: %v", id, err)
	}
	return s
}

// Calls of a parent, its child and its grandchild at once all add up: each
// session's own usage, and the tree usage of it and every ancestor; each
// call is a model_call event in its session's log; the usage outlives the
// manager, and a call told of a stopped session still counts.
func TestModelCalledAddsUpInTheTree(t *testing.T) {
	deep := func(o *Options) { o.Limits.MaxDepth = 2 }
	e := newEnv(t, deep)
	p := e.create(berth.CreateRequest{})
	c := e.spawn(p.ID, berth.CreateRequest{})
	g := e.spawn(c.ID, berth.CreateRequest{})
	const each = 15
	var wg sync.WaitGroup
	for _, id := range []string{p.ID, c.ID, g.ID} {
		for range each {
			wg.Go(func() { e.m.GatewaySessions().Called(id, modelCall(10, 0.25)) })
		}
	}
	wg.Wait()

	check := func(when string) {
		t.Helper()
		pu, cu, gu := e.get(p.ID).Usage, e.get(c.ID).Usage, e.get(g.ID).Usage
		if pu.ModelCalls != each || pu.InputTokens != each*10 || pu.CostUSD != each*0.25 || pu.Tree == nil ||
			pu.Tree.ModelCalls != 3*each || pu.Tree.OutputTokens != 3*each*20 || pu.Tree.CacheReadTokens != 3*each*3 {
			t.Fatalf("%s: the parent's usage %+v, tree %+v", when, pu, pu.Tree)
		}
		if cu.ModelCalls != each || cu.Tree == nil || cu.Tree.ModelCalls != 2*each || cu.Tree.CostUSD != 2*each*0.25 {
			t.Fatalf("%s: the child's usage %+v, tree %+v", when, cu, cu.Tree)
		}
		if gu.ModelCalls != each || gu.Tree != nil {
			t.Fatalf("%s: the grandchild's usage %+v, tree %+v", when, gu, gu.Tree)
		}
	}
	check("live")
	calls := eventData[berth.ModelCallData](e, g.ID, berth.EventModelCall)
	if len(calls) != each {
		t.Fatalf("%d model_call events in the grandchild's log, want %d", len(calls), each)
	}
	want := berth.ModelCallData{Upstream: "anthropic", Model: "claude-test", Status: 200, InputTokens: 10, OutputTokens: 20,
		CacheReadTokens: 3, CostUSD: 0.25, DurationMS: 1500, FirstByteMS: 200}
	if calls[0] != want {
		t.Fatalf("model_call %+v, want %+v", calls[0], want)
	}

	e.close()
	e.open(deep)
	check("after a restart")
	// The sessions are stopped now: a late call still counts.
	e.m.GatewaySessions().Called(g.ID, modelCall(10, 0.25))
	if pu := e.get(p.ID).Usage; pu.Tree.ModelCalls != 3*each+1 {
		t.Fatalf("a late call of a stopped grandchild: the parent's tree counts %d calls", pu.Tree.ModelCalls)
	}
	if n := len(ofType(e.events(g.ID), berth.EventModelCall)); n != each+1 {
		t.Fatalf("%d model_call events after the late one", n)
	}
	// A deleted session's call is dropped.
	e.m.GatewaySessions().Called("ses_gone", modelCall(1, 1))
}

// A session at its cost budget is refused (rate_limited, the message the
// gateway answers), shows over_budget and logs budget_exceeded once; a
// raised budget lets the next call through and clears the badge, and the
// next crossing is logged again; the refusal outlives a restart.
func TestAdmitRefusesAtTheBudget(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{MaxCostUSD: new(1.0)})
	if s.MaxCostUSD == nil || *s.MaxCostUSD != 1 {
		t.Fatalf("created with max_cost_usd %v", s.MaxCostUSD)
	}
	if err := e.admit(s.ID); err != nil {
		t.Fatalf("a fresh session refused: %v", err)
	}
	e.m.GatewaySessions().Called(s.ID, modelCall(10, 0.6))
	if err := e.admit(s.ID); err != nil {
		t.Fatalf("at $0.60 of $1.00: %v", err)
	}
	e.m.GatewaySessions().Called(s.ID, modelCall(10, 0.5))
	err := e.admit(s.ID)
	if !berth.IsCode(err, berth.ERateLimited) || berth.ErrorMessage(err) != "this session's budget of $1.00 is spent" {
		t.Fatalf("at $1.10 of $1.00: %v", err)
	}
	if b := e.get(s.ID).Badge; b != berth.BadgeOverBudget {
		t.Fatalf("badge %s, want over_budget", b)
	}
	// A call already in flight when the budget was reached.
	e.m.GatewaySessions().Called(s.ID, modelCall(1, 0.1))
	exceeded := eventData[berth.BudgetExceededData](e, s.ID, berth.EventBudgetExceeded)
	if len(exceeded) != 1 || exceeded[0].Limit != berth.LimitCost || exceeded[0].Max != 1 || exceeded[0].Spent < 1.09 || exceeded[0].Spent > 1.11 {
		t.Fatalf("budget_exceeded events %+v, want one at $1.10", exceeded)
	}

	got := e.patchBudget(s.ID, berth.SessionPatch{MaxCostUSD: new(2.0)})
	if got.Badge == berth.BadgeOverBudget || *got.MaxCostUSD != 2 {
		t.Fatalf("after raising the budget: badge %s, max %v", got.Badge, *got.MaxCostUSD)
	}
	if err := e.admit(s.ID); err != nil {
		t.Fatalf("after raising the budget to $2.00: %v", err)
	}
	e.m.GatewaySessions().Called(s.ID, modelCall(1, 1))
	if n := len(eventData[berth.BudgetExceededData](e, s.ID, berth.EventBudgetExceeded)); n != 2 {
		t.Fatalf("%d budget_exceeded events after the second crossing, want 2", n)
	}

	e.close()
	e.open()
	if err := e.admit(s.ID); !berth.IsCode(err, berth.ERateLimited) {
		t.Fatalf("after a restart, at $2.20 of $2.00: %v", err)
	}
}

// A child's spending counts against every ancestor's budget: a child
// without a budget of its own is refused once its parent's tree reached
// the parent's, and so is its sibling; the parent shows over_budget and
// logs budget_exceeded, the child neither.
func TestAdmitRefusesAChildWhoseAncestorIsSpent(t *testing.T) {
	e := newEnv(t)
	p := e.create(berth.CreateRequest{MaxTokens: new(int64(100))})
	c := e.spawn(p.ID, berth.CreateRequest{})
	sib := e.spawn(p.ID, berth.CreateRequest{})
	e.m.GatewaySessions().Called(c.ID, modelCall(20, 0)) // 20 + 40 + 3 tokens
	if err := e.admit(c.ID); err != nil {
		t.Fatalf("at 63 of 100 tokens: %v", err)
	}
	e.m.GatewaySessions().Called(c.ID, modelCall(20, 0))
	for _, id := range []string{c.ID, sib.ID} {
		err := e.admit(id)
		if !berth.IsCode(err, berth.ERateLimited) || !strings.Contains(berth.ErrorMessage(err), "budget of 100 tokens of session "+p.ID) {
			t.Fatalf("a child of a spent parent: %v", err)
		}
	}
	if err := e.admit(p.ID); berth.ErrorMessage(err) != "this session's budget of 100 tokens is spent" {
		t.Fatalf("the parent: %v", err)
	}
	if b := e.get(p.ID).Badge; b != berth.BadgeOverBudget {
		t.Fatalf("the parent's badge %s", b)
	}
	if b := e.get(c.ID).Badge; b == berth.BadgeOverBudget {
		t.Fatal("the child without a budget shows over_budget")
	}
	if ex := eventData[berth.BudgetExceededData](e, p.ID, berth.EventBudgetExceeded); len(ex) != 1 || ex[0].Limit != berth.LimitTokens || ex[0].Spent != 126 {
		t.Fatalf("the parent's budget_exceeded: %+v", ex)
	}
	if n := len(ofType(e.events(c.ID), berth.EventBudgetExceeded)); n != 0 {
		t.Fatalf("%d budget_exceeded in the child's log", n)
	}
}

// A budget lowered by PATCH to what is already spent is reached then:
// over_budget, one budget_exceeded, and the next call refused; bad
// budgets are refused on create, spawn and PATCH, naming the field, and
// change nothing.
func TestBudgetPatchAndValidation(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	e.m.GatewaySessions().Called(s.ID, modelCall(100, 0.5))
	got := e.patchBudget(s.ID, berth.SessionPatch{MaxTokens: new(int64(303))})
	if got.Badge != berth.BadgeOverBudget || got.MaxTokens == nil || *got.MaxTokens != 303 {
		t.Fatalf("lowered to what is spent: badge %s, max_tokens %v", got.Badge, got.MaxTokens)
	}
	if err := e.admit(s.ID); !berth.IsCode(err, berth.ERateLimited) {
		t.Fatalf("after the budget was lowered to what is spent: %v", err)
	}
	if ex := eventData[berth.BudgetExceededData](e, s.ID, berth.EventBudgetExceeded); len(ex) != 1 || ex[0].Spent != 303 {
		t.Fatalf("budget_exceeded %+v", ex)
	}

	ctx := context.Background()
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", MaxCostUSD: new(-1.0)})
	if _, field := errWhat(err); !berth.IsCode(err, berth.EInvalid) || field != "max_cost_usd" {
		t.Fatalf("create with max_cost_usd -1: %v", err)
	}
	_, err = e.m.SpawnChild(ctx, s.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, MaxTokens: new(int64(-5))}, "")
	if _, field := errWhat(err); !berth.IsCode(err, berth.EInvalid) || field != "max_tokens" {
		t.Fatalf("spawn with max_tokens -5: %v", err)
	}
	_, err = e.m.PatchSession(ctx, s.ID, berth.SessionPatch{MaxTokens: new(int64(-1)), Name: new("x")})
	if _, field := errWhat(err); !berth.IsCode(err, berth.EInvalid) || field != "max_tokens" {
		t.Fatalf("PATCH max_tokens -1: %v", err)
	}
	if now := e.get(s.ID); now.Name == "x" || *now.MaxTokens != 303 {
		t.Fatalf("a refused PATCH changed the session: name %q max_tokens %d", now.Name, *now.MaxTokens)
	}
	// A stopped session's budget is changed in the store.
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.patchBudget(s.ID, berth.SessionPatch{MaxTokens: new(int64(1000))}); *got.MaxTokens != 1000 {
		t.Fatalf("a stopped session's budget: %d", *got.MaxTokens)
	}
	if err := e.admit(s.ID); err != nil {
		t.Fatalf("a stopped session's raised budget: %v", err)
	}
}

// countingStore counts the session reads.
type countingStore struct {
	berth.Store
	gets atomic.Int64
}

func (c *countingStore) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	c.gets.Add(1)
	return c.Store.GetSession(ctx, id)
}

// Admissions are answered from memory: many of a child under a parent read
// each session once, not once a call.
func TestAdmitReadsTheStoreOnce(t *testing.T) {
	e := &env{t: t, home: t.TempDir()}
	var cs *countingStore
	e.wrap = func(s berth.Store) berth.Store { cs = &countingStore{Store: s}; return cs }
	e.open()
	t.Cleanup(e.close)
	p := e.create(berth.CreateRequest{MaxCostUSD: new(10.0)})
	c := e.spawn(p.ID, berth.CreateRequest{})
	before := cs.gets.Load()
	for range 200 {
		if err := e.admit(c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.gets.Load() - before; n > 2 {
		t.Fatalf("200 admissions read the store %d times", n)
	}
}

// usageObserver records the model calls it is told of.
type usageObserver struct {
	noObserver
	mu     sync.Mutex
	agents []string
}

func (o *usageObserver) ModelCalled(agent string, c gateway.Call) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.agents = append(o.agents, agent+" "+c.Model)
}

// An Observer that is a UsageObserver (the metrics) is told of each call
// with the session's agent; a call of no session is not told.
func TestModelCalledTellsTheObserver(t *testing.T) {
	o := &usageObserver{}
	e := newEnv(t, func(opts *Options) { opts.Observer = o })
	s := e.create(berth.CreateRequest{})
	e.m.GatewaySessions().Called(s.ID, modelCall(1, 0))
	e.m.GatewaySessions().Called("ses_gone", modelCall(1, 0))
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.agents) != 1 || o.agents[0] != "demo claude-test" {
		t.Fatalf("the observer was told %q", o.agents)
	}
}

// A model call that ends after its session stopped is logged after
// session_stopped; repair and a booting daemon still take the log as
// ending with session_stopped, and add no second one.
func TestLateModelCallKeepsTheLogStopped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{MaxTokens: new(int64(10))})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	e.m.GatewaySessions().Called(s.ID, modelCall(5, 0))
	evs := e.events(s.ID)
	if tail := types(evs[len(evs)-3:]); tail[0] != berth.EventSessionStopped || tail[1] != berth.EventModelCall || tail[2] != berth.EventBudgetExceeded {
		t.Fatalf("log tail %v", tail)
	}
	if rep, err := e.m.Repair(ctx, s.ID, false, false); err != nil || len(rep.Issues) != 0 {
		t.Fatalf("repair of a log with a late model call: %+v, %v", rep, err)
	}

	// A daemon that died once session_stopped was logged, before the
	// session was stored stopped, and a call that ended then.
	a := e.create(berth.CreateRequest{})
	if _, err := e.log.AppendSync(ctx, berth.NewEvent(a.ID, "", berth.EventSessionStopped, map[string]any{"stop_reason": "agent_exited"})); err != nil {
		t.Fatal(err)
	}
	e.m.GatewaySessions().Called(a.ID, modelCall(1, 0))
	e.crash()
	if n := len(ofType(e.events(a.ID), berth.EventSessionStopped)); n != 1 {
		t.Fatalf("%d session_stopped after the boot", n)
	}
	if got := e.get(a.ID); got.State != berth.StateStopped || got.Usage.ModelCalls != 1 {
		t.Fatalf("after the boot: %s, %d calls", got.State, got.Usage.ModelCalls)
	}
}

// An agent's spawn_child gives its child budgets of its own; a bad one is
// refused naming the field.
func TestSpawnChildToolTakesBudgets(t *testing.T) {
	e := newEnv(t)
	p := e.create(berth.CreateRequest{})
	tools := &childTools{m: e.m, id: p.ID}
	ctx := context.Background()
	res, err := tools.SpawnChild(ctx, berth.SpawnChildArgs{TTLSeconds: 60, MaxCostUSD: new(0.5), MaxTokens: new(int64(900))})
	if err != nil {
		t.Fatal(err)
	}
	c := e.get(res.ChildID)
	if c.MaxCostUSD == nil || *c.MaxCostUSD != 0.5 || c.MaxTokens == nil || *c.MaxTokens != 900 {
		t.Fatalf("the child's budgets: %v %v", c.MaxCostUSD, c.MaxTokens)
	}
	_, err = tools.SpawnChild(ctx, berth.SpawnChildArgs{TTLSeconds: 60, MaxCostUSD: new(-1.0)})
	if _, field := errWhat(err); !berth.IsCode(err, berth.EInvalid) || field != "max_cost_usd" {
		t.Fatalf("spawn_child with max_cost_usd -1: %v", err)
	}
}

// An admission of a child two levels down, from memory: what the gateway
// adds to every model call.
func BenchmarkAdmitModelCall(b *testing.B) {
	st := memory.New()
	ctx := context.Background()
	now := time.Now()
	for _, s := range []*berth.Session{
		{ID: "ses_r", RootID: "ses_r", State: berth.StateActive, CreatedAt: now, MaxCostUSD: new(100.0)},
		{ID: "ses_c", ParentID: "ses_r", RootID: "ses_r", Depth: 1, State: berth.StateActive, CreatedAt: now},
		{ID: "ses_g", ParentID: "ses_c", RootID: "ses_r", Depth: 2, State: berth.StateActive, CreatedAt: now, MaxTokens: new(int64(1e9))},
	} {
		if err := st.CreateSession(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	m := New(Options{Store: st})
	for b.Loop() {
		if err := m.GatewaySessions().Admit(ctx, "ses_g", "anthropic"); err != nil {
			b.Fatal(err)
		}
	}
}

// A call whose counts are negative or whose cost is not a number still
// counts as a call, its bad numbers as 0.
func TestModelCalledTakesBadNumbersAsZero(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	e.m.GatewaySessions().Called(s.ID, gateway.Call{Upstream: "u", InputTokens: -5, OutputTokens: 7, CostUSD: math.NaN()})
	e.m.GatewaySessions().Called(s.ID, gateway.Call{Upstream: "u", CostUSD: math.Inf(1)})
	if u := e.get(s.ID).Usage; u.ModelCalls != 2 || u.InputTokens != 0 || u.OutputTokens != 7 || u.CostUSD != 0 {
		t.Fatalf("usage %+v", u)
	}
}

// The budgets a call's transaction read may be older than a PATCH's that
// committed meanwhile: once memory holds a session's budgets from a read
// or a PATCH, a call's answer does not take them back.
func TestStaleBudgetsDoNotOverwriteAPatch(t *testing.T) {
	u := usage{spends: map[string]*spend{}}
	u.patched(context.Background(), spend{}, &berth.Session{ID: "ses_a", MaxCostUSD: new(2.0)})
	u.counted(berth.SessionUsage{ID: "ses_a", Usage: berth.Usage{ModelCalls: 1, CostUSD: 1.5}, MaxCostUSD: new(1.0)})
	sp := u.spends["ses_a"]
	if *sp.maxCost != 2 || sp.total.CostUSD != 1.5 {
		t.Fatalf("after a call that read the old budget: max %v, spent %v", *sp.maxCost, sp.total.CostUSD)
	}
	// A session memory never read takes the call's budgets.
	u.counted(berth.SessionUsage{ID: "ses_b", Usage: berth.Usage{ModelCalls: 1}, MaxTokens: new(int64(5))})
	if b := u.spends["ses_b"]; b.maxTokens == nil || *b.maxTokens != 5 {
		t.Fatalf("a session never read: %+v", b)
	}
}
