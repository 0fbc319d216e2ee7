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
// are live facts), the others as stored. The store counts those by what
// their badge depends on when it can (berth.SessionCounter), reading no
// session whole; those a boot is reattaching are counted as its recovery
// read found them, from memory (before that read, the store counts them).
// The live and reattaching sessions are taken first and left out of the
// store's count by id, so a session stopping meanwhile is counted once.
func (m *Manager) Census(ctx context.Context) (Census, error) {
	counts := make(map[censusKey]int)
	var c Census
	// Before the live ones: one whose reattach ends meanwhile is in both.
	booting := m.set.bootTallies()
	live := m.set.all()
	exclude := make([]string, 0, len(live)+len(booting))
	for _, ls := range live {
		s := ls.View()
		exclude = append(exclude, s.ID)
		delete(booting, s.ID)
		counts[censusKey{s.State, s.Badge, s.Agent}]++
		c.QueuePending += s.Queue.Pending
		c.PermissionsPending += s.PendingPermissions
	}
	// Sessions being reattached count as the boot read them: the store
	// does not read them again while the cores reattach them.
	for id, t := range booting {
		exclude = append(exclude, id)
		counts[censusKey{t.State, t.Badge(), t.Agent}]++
	}
	// Stored sessions with no live session here: another node's, ones
	// being created or not yet reattached, and the stopped ones.
	stored, err := m.countStored(ctx, exclude)
	if err != nil {
		return Census{}, err
	}
	for _, n := range stored {
		counts[censusKey{n.State, n.Badge(), n.Agent}] += n.Sessions
	}
	c.Sessions = make([]SessionCount, 0, len(counts))
	for k, n := range counts {
		c.Sessions = append(c.Sessions, SessionCount{State: k.state, Badge: k.badge, Agent: k.agent, Sessions: n})
	}
	return c, nil
}

// countStored counts the stored sessions whose ids are not in exclude:
// by the store when it counts, else by listing them whole (a count of
// one each).
func (m *Manager) countStored(ctx context.Context, exclude []string) ([]berth.SessionCount, error) {
	if counter, ok := m.store.(berth.SessionCounter); ok {
		return counter.CountSessions(ctx, exclude)
	}
	skip := make(map[string]bool, len(exclude))
	for _, id := range exclude {
		skip[id] = true
	}
	var out []berth.SessionCount
	f := berth.SessionFilter{Limit: censusPage}
	for {
		page, err := m.store.ListSessions(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Sessions {
			if !skip[s.ID] {
				out = append(out, berth.SessionCount{Tally: s.Tally(), Sessions: 1})
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}
