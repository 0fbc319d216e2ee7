package codec

import (
	"math"
	"strings"

	"github.com/berth-sh/berth"
)

// UsageColumns are a session row's usage columns (migration 0026), in the
// order of UsageRow.Targets: its own usage, then its tree's (its own and
// every descendant's).
const UsageColumns = `usage_calls, usage_input, usage_output, usage_cache_read, usage_cache_write, usage_cost, ` +
	`tree_calls, tree_input, tree_output, tree_cache_read, tree_cache_write, tree_cost`

// UsageColumnsOf is UsageColumns of the table whose alias is alias.
func UsageColumnsOf(alias string) string {
	return alias + "." + strings.ReplaceAll(UsageColumns, ", ", ", "+alias+".")
}

// UsageRow is a session's usage as its columns hold it.
type UsageRow struct {
	Own, Tree berth.Usage
}

// Targets are the scan targets of UsageColumns.
func (r *UsageRow) Targets() []any {
	return []any{&r.Own.ModelCalls, &r.Own.InputTokens, &r.Own.OutputTokens, &r.Own.CacheReadTokens, &r.Own.CacheWriteTokens, &r.Own.CostUSD,
		&r.Tree.ModelCalls, &r.Tree.InputTokens, &r.Tree.OutputTokens, &r.Tree.CacheReadTokens, &r.Tree.CacheWriteTokens, &r.Tree.CostUSD}
}

// Usage is the row's usage as a Session shows it: the own usage, with
// Tree set once a descendant has called a model.
func (r UsageRow) Usage() berth.Usage {
	u := r.Own
	if r.Tree.ModelCalls > r.Own.ModelCalls {
		t := r.Tree
		u.Tree = &t
	}
	return u
}

// UsageArgs are the counts of d in the order of the columns of one half
// of UsageColumns (calls, input, output, cache read, cache write, cost).
func UsageArgs(d berth.Usage) []any {
	return []any{d.ModelCalls, d.InputTokens, d.OutputTokens, d.CacheReadTokens, d.CacheWriteTokens, d.CostUSD}
}

// CheckUsage is what every store refuses of a usage delta: EInvalid for a
// negative or non-finite count.
func CheckUsage(d berth.Usage) error {
	if d.ModelCalls < 0 || d.InputTokens < 0 || d.OutputTokens < 0 || d.CacheReadTokens < 0 || d.CacheWriteTokens < 0 ||
		d.CostUSD < 0 || math.IsNaN(d.CostUSD) || math.IsInf(d.CostUSD, 0) {
		return berth.Errorf(berth.EInvalid, "a usage delta must not be negative")
	}
	return nil
}

// MaxAncestors bounds the walk up a session's tree of AddUsage: far more
// than any tree's depth, and a stop should a stored tree ever loop.
const MaxAncestors = 1024

// SessionUsage is what AddUsage answers of one session read back as
// DecodeSession reads it, with the row's usage.
func SessionUsage(s *berth.Session, r UsageRow) berth.SessionUsage {
	return berth.SessionUsage{ID: s.ID, ParentID: s.ParentID, Usage: r.Usage(), MaxCostUSD: s.MaxCostUSD, MaxTokens: s.MaxTokens}
}

// WalkUsage is AddUsage's walk up a session's tree, the same in every SQL
// store. add adds the delta to one session's row (own: the row of id
// itself, not an ancestor's) and scans the row's doc and UsageColumns
// into dest. A missing id is ENotFound; a missing ancestor ends the walk.
func WalkUsage(id string, add func(cur string, own bool, dest ...any) error) ([]berth.SessionUsage, error) {
	var out []berth.SessionUsage
	for cur := id; cur != "" && len(out) < MaxAncestors; {
		var doc []byte
		var u UsageRow
		err := add(cur, len(out) == 0, append([]any{&doc}, u.Targets()...)...)
		if found, err := Found(err, "add usage"); err != nil {
			return nil, err
		} else if !found && len(out) == 0 {
			return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
		} else if !found {
			// An ancestor deleted before its descendant: the walk ends.
			break
		}
		sess, err := DecodeSession(doc, 0, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, SessionUsage(sess, u))
		cur = sess.ParentID
	}
	return out, nil
}

// SpentColumns are, in a count's SELECT over UsageColumns, what a session
// with a budget spent, as Usage.Total counts it (its tree's once a
// descendant has called a model, as UsageRow shows it), and 0 for one
// without: input, output, cache read and cache write tokens, then cost.
const SpentColumns = `CASE WHEN max_cost IS NULL AND max_tokens IS NULL THEN 0
		WHEN tree_calls > usage_calls THEN tree_input ELSE usage_input END,
	CASE WHEN max_cost IS NULL AND max_tokens IS NULL THEN 0
		WHEN tree_calls > usage_calls THEN tree_output ELSE usage_output END,
	CASE WHEN max_cost IS NULL AND max_tokens IS NULL THEN 0
		WHEN tree_calls > usage_calls THEN tree_cache_read ELSE usage_cache_read END,
	CASE WHEN max_cost IS NULL AND max_tokens IS NULL THEN 0
		WHEN tree_calls > usage_calls THEN tree_cache_write ELSE usage_cache_write END,
	CASE WHEN max_cost IS NULL AND max_tokens IS NULL THEN 0.0
		WHEN tree_calls > usage_calls THEN tree_cost ELSE usage_cost END`
