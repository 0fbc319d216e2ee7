package codec

import (
	"encoding/json"

	"github.com/berth-sh/berth"
)

// CountRow is one group of a SQL store's CountSessions as its statement
// selects it, in the order of Targets: state, agent, stop reason, whether
// the session failed, waits for an answer (pending permissions or
// elicitations), misses a credential (auth's missing) or needs auth
// (needs_auth); its budgets as the document's JSON text (NULL for none);
// what it spent as Usage.Total counts it; how many sessions the group
// holds. The statement leaves the fields its state's badge does not read
// at their zero (berth.Tally), and the spending of a session without a
// budget at 0, so that those share groups.
type CountRow struct {
	State, Agent, StopReason                string
	Failed, Waiting, AuthMissing, NeedsAuth bool
	MaxCost, MaxTokens                      *string
	Spent                                   berth.Usage
	Sessions                                int64
}

// Targets are the scan targets of the row's columns.
func (r *CountRow) Targets() []any {
	return []any{&r.State, &r.Agent, &r.StopReason, &r.Failed, &r.Waiting, &r.AuthMissing, &r.NeedsAuth,
		&r.MaxCost, &r.MaxTokens,
		&r.Spent.InputTokens, &r.Spent.OutputTokens, &r.Spent.CacheReadTokens, &r.Spent.CacheWriteTokens, &r.Spent.CostUSD,
		&r.Sessions}
}

// tally is the row's berth.Tally: the budgets decoded as DecodeSession
// decodes them and held against the spending by Session.Tally itself.
// EInternal for a budget that does not decode.
func (r *CountRow) tally() (berth.Tally, error) {
	s := berth.Session{State: berth.State(r.State), Agent: r.Agent, StopReason: berth.StopReason(r.StopReason),
		NeedsAuth: r.NeedsAuth, Usage: r.Spent}
	for _, b := range []struct {
		text *string
		to   any
	}{{r.MaxCost, &s.MaxCostUSD}, {r.MaxTokens, &s.MaxTokens}} {
		if b.text == nil {
			continue
		}
		if err := json.Unmarshal([]byte(*b.text), b.to); err != nil {
			return berth.Tally{}, berth.WrapError(berth.EInternal, err, "decode stored session budget")
		}
	}
	t := s.Tally()
	// The flags the statement computed stand for the fields they read.
	if s.State == berth.StateStopped {
		t.Failed = r.Failed
	} else {
		t.Waiting, t.AuthMissing = r.Waiting, r.AuthMissing
	}
	return t, nil
}

// SessionCounts merges rows into one count per tally: rows of sessions
// with budgets, grouped by what they spent, share tallies.
func SessionCounts(rows []CountRow) ([]berth.SessionCount, error) {
	by := make(map[berth.Tally]int, len(rows))
	for i := range rows {
		t, err := rows[i].tally()
		if err != nil {
			return nil, err
		}
		by[t] += int(rows[i].Sessions)
	}
	return Counts(by), nil
}

// Counts lists the counts of by, one per tally.
func Counts(by map[berth.Tally]int) []berth.SessionCount {
	out := make([]berth.SessionCount, 0, len(by))
	for t, n := range by {
		out = append(out, berth.SessionCount{Tally: t, Sessions: n})
	}
	return out
}
