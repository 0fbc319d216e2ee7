package berth

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// A session whose tree's spending reached a budget is over_budget while
// active and idle or busy (a pending question and a hung turn say more);
// below both budgets, or with none, it is not; a stopped one is stopped.
func TestOverBudgetBadge(t *testing.T) {
	spent := Usage{ModelCalls: 2, InputTokens: 60, OutputTokens: 40, CostUSD: 1.5}
	child := spent
	child.Tree = &Usage{ModelCalls: 3, InputTokens: 100, OutputTokens: 100, CostUSD: 5}
	cases := []struct {
		name string
		s    Session
		busy bool
		want Badge
	}{
		{"no budget", Session{State: StateActive, Usage: spent}, false, BadgeIdle},
		{"under both", Session{State: StateActive, Usage: spent, MaxCostUSD: new(2.0), MaxTokens: new(int64(101))}, false, BadgeIdle},
		{"cost reached", Session{State: StateActive, Usage: spent, MaxCostUSD: new(1.5)}, false, BadgeOverBudget},
		{"tokens reached", Session{State: StateActive, Usage: spent, MaxTokens: new(int64(100))}, false, BadgeOverBudget},
		{"the tree's spending counts", Session{State: StateActive, Usage: child, MaxCostUSD: new(4.0)}, false, BadgeOverBudget},
		{"a zero budget", Session{State: StateActive, MaxTokens: new(int64(0))}, false, BadgeOverBudget},
		{"over budget and busy", Session{State: StateActive, Usage: spent, MaxCostUSD: new(1.0)}, true, BadgeRunning},
		{"over budget and waiting", Session{State: StateActive, Usage: spent, MaxCostUSD: new(1.0), PendingPermissions: 1}, false, BadgeWaiting},
		{"over budget before needs_auth", Session{State: StateActive, Usage: spent, MaxCostUSD: new(1.0), NeedsAuth: true}, false, BadgeOverBudget},
		{"stopped", Session{State: StateStopped, Usage: spent, MaxCostUSD: new(1.0)}, false, BadgeStopped},
	}
	for _, c := range cases {
		if got := c.s.ComputeBadge(c.busy, false); got != c.want {
			t.Errorf("%s: badge %s, want %s", c.name, got, c.want)
		}
	}
}

// Exceeded names the limit reached and its value: cost before tokens.
func TestExceededNamesTheLimit(t *testing.T) {
	s := Session{Usage: Usage{InputTokens: 10, CostUSD: 1}, MaxCostUSD: new(1.0), MaxTokens: new(int64(10))}
	if limit, max := s.Exceeded(); limit != LimitCost || max != 1 {
		t.Fatalf("Exceeded = %q %v", limit, max)
	}
	s.MaxCostUSD = new(2.0)
	if limit, max := s.Exceeded(); limit != LimitTokens || max != 10 {
		t.Fatalf("Exceeded = %q %v", limit, max)
	}
	s.MaxTokens = new(int64(11))
	if limit, _ := s.Exceeded(); limit != "" {
		t.Fatalf("Exceeded = %q under both", limit)
	}
}

// The refusal says whose budget is spent and how much it was, with a code
// that is neither unavailable nor internal (the gateway answers 429).
func TestBudgetSpentMessages(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{BudgetSpent("", LimitCost, 5), "this session's budget of $5.00 is spent"},
		{BudgetSpent("", LimitCost, 0.125), "this session's budget of $0.125 is spent"},
		{BudgetSpent("", LimitTokens, 100000), "this session's budget of 100000 tokens is spent"},
		{BudgetSpent("ses_p", LimitCost, 2.5), "the budget of $2.50 of session ses_p, an ancestor of this one, is spent"},
	}
	for _, c := range cases {
		if got := ErrorMessage(c.err); got != c.want {
			t.Errorf("message %q, want %q", got, c.want)
		}
		if IsCode(c.err, EUnavailable) || IsCode(c.err, EInternal) {
			t.Errorf("%v: the gateway would answer 503", c.err)
		}
	}
}

// Budgets below 0 or not finite are invalid_argument naming the field, on
// create and on PATCH.
func TestBudgetValidation(t *testing.T) {
	cases := []struct {
		cost   *float64
		tokens *int64
		field  string
	}{
		{new(-0.01), nil, "max_cost_usd"},
		{new(math.NaN()), nil, "max_cost_usd"},
		{new(math.Inf(1)), nil, "max_cost_usd"},
		{nil, new(int64(-1)), "max_tokens"},
		{new(0.0), new(int64(0)), ""},
		{new(12.5), new(int64(1)), ""},
	}
	for _, c := range cases {
		req := CreateRequest{MaxCostUSD: c.cost, MaxTokens: c.tokens}
		p := SessionPatch{MaxCostUSD: c.cost, MaxTokens: c.tokens}
		for _, err := range []error{req.ValidateBudget(), p.Validate()} {
			if c.field == "" {
				if err != nil {
					t.Errorf("%v %v: %v", c.cost, c.tokens, err)
				}
				continue
			}
			if !IsCode(err, EInvalid) || ErrorDetails(err)["field"] != c.field || !strings.Contains(ErrorMessage(err), c.field) {
				t.Errorf("%v %v: %v, want invalid_argument naming %s", c.cost, c.tokens, err, c.field)
			}
		}
	}
}

// A PATCH of a budget alone is a change of berth's own, applied to the
// session; usage.tree is absent until a descendant has called.
func TestBudgetPatchAndUsageJSON(t *testing.T) {
	p := SessionPatch{MaxCostUSD: new(3.0)}
	if p.Empty() || !p.Own() || p.Agent() {
		t.Fatalf("a budget patch: empty %v own %v agent %v", p.Empty(), p.Own(), p.Agent())
	}
	var s Session
	p.ApplyOwn(&s)
	if s.MaxCostUSD == nil || *s.MaxCostUSD != 3 || s.MaxTokens != nil {
		t.Fatalf("applied: %v %v", s.MaxCostUSD, s.MaxTokens)
	}
	if f := p.OwnFields(); len(f) != 1 || f[0] != "max_cost_usd" {
		t.Fatalf("own fields %v", f)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"usage":{"model_calls":0,"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}`) ||
		!strings.Contains(string(b), `"max_cost_usd":3`) || strings.Contains(string(b), "max_tokens") {
		t.Fatalf("Session JSON: %s", b)
	}
}
