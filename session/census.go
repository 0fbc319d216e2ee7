package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// SessionCount is how many sessions share a state, a badge and an agent.
type SessionCount struct {
	State    berth.State
	Badge    berth.Badge
	Agent    string
	Sessions int
}

// Census is the daemon's sessions counted as the API shows them, for
// metrics: every session of the store, live ones as their runtime sees them.
type Census struct {
	Sessions []SessionCount
	// QueuePending is the pending queue entries of the live sessions;
	// PermissionsPending their permission requests awaiting a decision.
	QueuePending       int
	PermissionsPending int
}

// censusPage is how many sessions one store read of a census takes.
const censusPage = 1000

// censusKey groups sessions in a census.
type censusKey struct {
	state berth.State
	badge berth.Badge
	agent string
}

// Census counts every session as GET /v1/sessions would show it: the
// store's sessions page by page, each live one replaced by its runtime's
// view (its badge, queue and pending permissions are live facts).
func (m *Manager) Census(ctx context.Context) (Census, error) {
	counts := make(map[censusKey]int)
	var c Census
	seen := make(map[string]bool)
	add := func(s *berth.Session) {
		counts[censusKey{s.State, s.Badge, s.Agent}]++
	}
	for _, rt := range m.runtimes() {
		s := rt.view()
		seen[s.ID] = true
		add(s)
		c.QueuePending += s.Queue.Pending
		c.PermissionsPending += s.PendingPermissions
	}
	f := berth.SessionFilter{Limit: censusPage}
	for {
		page, err := m.store.ListSessions(ctx, f)
		if err != nil {
			return Census{}, err
		}
		for _, s := range page.Sessions {
			if seen[s.ID] {
				continue
			}
			// Stored only: its badge as ListSessions computes it.
			s.Badge = s.ComputeBadge(false, false)
			add(s)
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	c.Sessions = make([]SessionCount, 0, len(counts))
	for k, n := range counts {
		c.Sessions = append(c.Sessions, SessionCount{State: k.state, Badge: k.badge, Agent: k.agent, Sessions: n})
	}
	return c, nil
}
