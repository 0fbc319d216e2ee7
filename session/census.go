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
// metrics: every session of the store, live ones as their live session sees them.
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

// Census counts every session as GET /v1/sessions would show it: each
// live one as its live session's view (its badge, queue and pending permissions
// are live facts), the others as stored. Stopped sessions, nearly all of
// a long-lived home, are counted by the store when it can
// (berth.SessionCounter) rather than read whole. The live sessions are
// taken first and left out of the store's reads by id, so a session
// stopping meanwhile is counted once.
func (m *Manager) Census(ctx context.Context) (Census, error) {
	counts := make(map[censusKey]int)
	var c Census
	live := m.set.all()
	seen := make(map[string]bool, len(live))
	exclude := make([]string, 0, len(live))
	for _, ls := range live {
		s := ls.View()
		seen[s.ID] = true
		exclude = append(exclude, s.ID)
		counts[censusKey{s.State, s.Badge, s.Agent}]++
		c.QueuePending += s.Queue.Pending
		c.PermissionsPending += s.PendingPermissions
	}
	// Stored sessions with no live session here: another node's, or ones being
	// created; and, without a counting store, the stopped ones.
	states := []berth.State{berth.StateStarting, berth.StateActive, berth.StateStopping}
	counter, canCount := m.store.(berth.SessionCounter)
	if !canCount {
		states = append(states, berth.StateStopped)
	}
	for _, state := range states {
		f := berth.SessionFilter{State: state, Limit: censusPage}
		for {
			page, err := m.store.ListSessions(ctx, f)
			if err != nil {
				return Census{}, err
			}
			for _, s := range page.Sessions {
				if !seen[s.ID] {
					// Its badge as ListSessions computes it.
					counts[censusKey{s.State, s.ComputeBadge(false, false), s.Agent}]++
				}
			}
			if page.NextCursor == "" {
				break
			}
			f.Cursor = page.NextCursor
		}
	}
	if canCount {
		stopped, err := counter.CountStopped(ctx, exclude)
		if err != nil {
			return Census{}, err
		}
		for _, n := range stopped {
			// What a stopped session's badge depends on, and nothing else.
			s := berth.Session{State: berth.StateStopped, StopReason: n.StopReason}
			if n.HasFailure {
				s.Failure = &berth.Failure{}
			}
			counts[censusKey{berth.StateStopped, s.ComputeBadge(false, false), n.Agent}] += n.Sessions
		}
	}
	c.Sessions = make([]SessionCount, 0, len(counts))
	for k, n := range counts {
		c.Sessions = append(c.Sessions, SessionCount{State: k.state, Badge: k.badge, Agent: k.agent, Sessions: n})
	}
	return c, nil
}
