package berth

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Usage is what a session's model calls through the model gateway used
// (docs/api.md, "Usage and budgets"). The agent's own ACP usage_update
// is not counted here: it stays a usage event.
type Usage struct {
	ModelCalls       int64   `json:"model_calls"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	// Tree is the session's own usage and every descendant's; nil until
	// a descendant has called a model (it would equal the own usage).
	Tree *Usage `json:"tree,omitempty"`
}

// Tokens is every token the calls counted: input, output and the cache's.
func (u Usage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Add adds d's counts (not its Tree) to u's.
func (u *Usage) Add(d Usage) {
	u.ModelCalls += d.ModelCalls
	u.InputTokens += d.InputTokens
	u.OutputTokens += d.OutputTokens
	u.CacheReadTokens += d.CacheReadTokens
	u.CacheWriteTokens += d.CacheWriteTokens
	u.CostUSD += d.CostUSD
}

// Total is what counts against the session's budget: its tree's usage
// when it has one, else its own (without Tree in either case).
func (u Usage) Total() Usage {
	if u.Tree != nil {
		t := *u.Tree
		t.Tree = nil
		return t
	}
	u.Tree = nil
	return u
}

// Budget limits: what BudgetExceededData.Limit names.
const (
	LimitCost   = "max_cost_usd"
	LimitTokens = "max_tokens"
)

// ModelCallData is the data of a model_call event: one call through the
// model gateway, never its prompt or its answer.
type ModelCallData struct {
	Upstream         string  `json:"upstream"`
	Model            string  `json:"model"`
	Status           int     `json:"status"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	DurationMS       int64   `json:"duration_ms"`
	FirstByteMS      int64   `json:"first_byte_ms"`
}

// Usage is the call's usage: one call with its tokens and cost.
func (d ModelCallData) Usage() Usage {
	return Usage{ModelCalls: 1, InputTokens: d.InputTokens, OutputTokens: d.OutputTokens,
		CacheReadTokens: d.CacheReadTokens, CacheWriteTokens: d.CacheWriteTokens, CostUSD: d.CostUSD}
}

// BudgetExceededData is the data of a budget_exceeded event: the limit
// the session's spending (its tree's) reached, and what was spent then.
type BudgetExceededData struct {
	// Limit is LimitCost or LimitTokens.
	Limit string `json:"limit"`
	// Max is the limit's value; Spent what was spent when it was reached
	// (US dollars for LimitCost, tokens for LimitTokens).
	Max   float64 `json:"max"`
	Spent float64 `json:"spent"`
}

// Exceeded says which of the session's budgets its spending has reached:
// the limit's name and value ("" when none is).
func (s *Session) Exceeded() (limit string, max float64) {
	t := s.Usage.Total()
	if s.MaxCostUSD != nil && t.CostUSD >= *s.MaxCostUSD {
		return LimitCost, *s.MaxCostUSD
	}
	if s.MaxTokens != nil && t.Tokens() >= *s.MaxTokens {
		return LimitTokens, float64(*s.MaxTokens)
	}
	return "", 0
}

// BudgetSpent is the error that refuses a model call of a session whose
// budget, or whose ancestor's (ancestor not ""), limit reached max: the
// gateway answers it as a 429 with its message.
func BudgetSpent(ancestor, limit string, max float64) error {
	amount := strconv.FormatFloat(max, 'f', 0, 64) + " tokens"
	if limit == LimitCost {
		amount = FormatUSD(max)
	}
	if ancestor != "" {
		return Errorf(ERateLimited, "the budget of %s of session %s, an ancestor of this one, is spent", amount, ancestor)
	}
	return Errorf(ERateLimited, "this session's budget of %s is spent", amount)
}

// FormatUSD formats an amount of US dollars with at least two decimals:
// $5.00, $0.125.
func FormatUSD(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	return "$" + whole + "." + frac
}

// ValidateBudget checks max_cost_usd and max_tokens (create and PATCH):
// each, when given, 0 or more (and a finite number). EInvalid naming the
// field.
func ValidateBudget(maxCost *float64, maxTokens *int64) error {
	if maxCost != nil && (*maxCost < 0 || math.IsNaN(*maxCost) || math.IsInf(*maxCost, 0)) {
		return &Error{Code: EInvalid, Message: fmt.Sprintf("max_cost_usd must be a number of US dollars, 0 or more (not %v)", *maxCost),
			Details: map[string]any{"field": LimitCost}}
	}
	if maxTokens != nil && *maxTokens < 0 {
		return &Error{Code: EInvalid, Message: fmt.Sprintf("max_tokens must be 0 or more (not %d)", *maxTokens),
			Details: map[string]any{"field": LimitTokens}}
	}
	return nil
}

// SessionUsage is a session's usage and budgets as the store has them
// after UsageStore.AddUsage.
type SessionUsage struct {
	ID       string
	ParentID string
	// Usage is the session's own usage with its Tree set when a
	// descendant has called a model.
	Usage      Usage
	MaxCostUSD *float64
	MaxTokens  *int64
}

// UsageStore keeps the sessions' usage of the model gateway.
type UsageStore interface {
	// AddUsage adds delta (its counts; its Tree is ignored) to session
	// id's own usage and to the tree usage of id and of every ancestor,
	// in one transaction. It returns each of them after the change, id
	// first, then its parent, up to its root. ENotFound if id is absent;
	// EInvalid for a negative count.
	AddUsage(ctx context.Context, id string, delta Usage) ([]SessionUsage, error)
}
