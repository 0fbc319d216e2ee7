package codec

import (
	"encoding/json"

	"github.com/berth-sh/berth"
)

// TallyColumns are a session row's tally columns (migration 0030): what
// its badge depends on besides its state, agent and spending, kept beside
// the document by CreateSession and UpdateSession so that CountSessions
// reads no document. In the order of TallyValues.
const TallyColumns = `stop_reason, failed, waiting, auth_missing, needs_auth, max_cost, max_tokens`

// TallyValues are s's values of TallyColumns: the fields of its
// berth.Tally its state reads (the others at their zero, as the count
// ignores them) and its budgets as the document's JSON text (nil for
// none). EInvalid for a budget that cannot be encoded.
func TallyValues(s *berth.Session) ([]any, error) {
	maxCost, err := budgetText(s.MaxCostUSD)
	if err != nil {
		return nil, err
	}
	maxTokens, err := budgetText(s.MaxTokens)
	if err != nil {
		return nil, err
	}
	t := s.Tally()
	return []any{string(t.StopReason), t.Failed, t.Waiting, t.AuthMissing, t.NeedsAuth, maxCost, maxTokens}, nil
}

// budgetText is a budget's JSON text as the document holds it, nil for
// none.
func budgetText[T any](b *T) (*string, error) {
	if b == nil {
		return nil, nil
	}
	text, err := json.Marshal(*b)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "session budget cannot be encoded")
	}
	return new(string(text)), nil
}
