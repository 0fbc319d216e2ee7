package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// testCountSessions: a store that counts its sessions counts them as
// reading them whole would, each by its berth.Tally (every state, the
// badges' fields, budgets held against the session's or its tree's
// spending), leaving out those excluded by id, however many.
func testCountSessions(t *testing.T, open Opener) {
	s := fresh(t, open)
	if _, ok := s.(berth.SessionCounter); !ok {
		t.Skip("the store does not count sessions")
	}
	excluded := createTallies(t, s)
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	badges := map[berth.Badge]bool{}
	for _, sess := range page.Sessions {
		badges[sess.ComputeBadge(false, false)] = true
	}
	// Every badge a stored session can show is among them.
	if len(badges) != 7 {
		t.Fatalf("the sessions show %d badges: %v", len(badges), badges)
	}
	checkCounts(t, s, excluded)
	checkCounts(t, s, nil)
	// A thousand ids more, of no session: a booting daemon's live ones.
	for i := range 1000 {
		excluded = append(excluded, fmt.Sprintf("ses_gone%04d", i))
	}
	checkCounts(t, s, excluded)
	// Updated, each session is counted as it is now: fields set, fields
	// cleared.
	for i, sess := range page.Sessions {
		switch i % 3 {
		case 0:
			sess.Failure, sess.NeedsAuth, sess.Auth, sess.MaxCostUSD, sess.MaxTokens = nil, false, nil, nil, nil
			sess.PendingPermissions, sess.PendingElicitations, sess.StopReason = 0, 0, ""
		case 1:
			sess.PendingElicitations, sess.MaxTokens, sess.Auth = 1, new(int64(5)), &berth.SessionAuth{Missing: "openai"}
			if sess.State == berth.StateStopped {
				sess.StopReason, sess.Failure = berth.StopAgentExited, &berth.Failure{Kind: berth.FailProcessExit}
			}
		}
		if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
			t.Fatal(err)
		}
	}
	checkCounts(t, s, nil)
}

// CheckTallyMigration checks that migration 30 fills the tally columns of
// a database written before it from each session's document: the store
// counts its sessions as reading them whole says. exec runs a statement on
// the backend; before are the statements that must precede dropping the
// migration's columns (its index's).
func CheckTallyMigration(t *testing.T, open func() berth.Store, exec func(s berth.Store, q string) error, before ...string) {
	s := open()
	createTallies(t, s)
	undo := before
	for _, c := range strings.Split(codec.TallyColumns, ", ") {
		undo = append(undo, "ALTER TABLE sessions DROP COLUMN "+c)
	}
	for _, q := range append(undo, `DELETE FROM schema_migrations WHERE version = 30`) {
		if err := exec(s, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open()
	defer s.Close()
	checkCounts(t, s, nil)
}

// checkCounts checks that the store counts the sessions not in exclude
// as reading them whole says.
func checkCounts(t *testing.T, s berth.Store, exclude []string) {
	t.Helper()
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := map[berth.Tally]int{}
	for _, sess := range page.Sessions {
		if !slices.Contains(exclude, sess.ID) {
			want[sess.Tally()]++
		}
	}
	counts, err := s.(berth.SessionCounter).CountSessions(ctx(t), exclude)
	if err != nil {
		t.Fatal(err)
	}
	got := map[berth.Tally]int{}
	for _, c := range counts {
		if got[c.Tally] != 0 || c.Sessions <= 0 {
			t.Errorf("CountSessions answered %+v: twice, or empty", c)
		}
		got[c.Tally] += c.Sessions
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CountSessions(%d excluded) =\n%v\nwant\n%v", len(exclude), got, want)
	}
}

// createTallies stores sessions of every state and of every field a
// stored session's badge depends on, of two agents, some with usage
// (their own, or their tree's through a child's calls) and budgets, and
// returns the ids of some of them to exclude.
func createTallies(t *testing.T, s berth.Store) []string {
	t.Helper()
	reasons := []berth.StopReason{berth.StopUserRequested, berth.StopAgentCrashed, berth.StopIdleTimeout}
	shapes := []func(*berth.Session){
		func(*berth.Session) {},
		func(s *berth.Session) { s.NeedsAuth = true },
		func(s *berth.Session) { s.Auth = &berth.SessionAuth{Missing: "anthropic"} },
		func(s *berth.Session) { s.Auth = &berth.SessionAuth{} },
		func(s *berth.Session) { s.PendingPermissions = 2 },
		func(s *berth.Session) { s.PendingElicitations = 1 },
		func(s *berth.Session) { s.Failure = &berth.Failure{Kind: berth.FailProcessExit, Message: "exit 1"} },
		// Each spends 30 tokens and 0.1 three times (0.30000000000000004):
		// reached through a child, not reached, reached (by tokens), not
		// reached through a child, reached, not reached by one ulp.
		func(s *berth.Session) { s.MaxCostUSD = new(0.3) },
		func(s *berth.Session) { s.MaxCostUSD = new(0.31) },
		func(s *berth.Session) { s.MaxCostUSD, s.MaxTokens = new(0.31), new(int64(30)) },
		func(s *berth.Session) { s.MaxTokens = new(int64(31)) },
		func(s *berth.Session) { s.MaxCostUSD = new(0.3) },
		func(s *berth.Session) { s.MaxCostUSD = new(0.3000000000000001) },
		// Fields of the same names elsewhere in the document are not its.
		func(s *berth.Session) {
			s.Labels = map[string]string{"stop_reason": "agent_crashed", "failure": "x", "needs_auth": "true"}
			s.Title = `{"pending_permissions": 3, "auth": {"missing": "x"}}`
		},
	}
	states := []berth.State{berth.StateStarting, berth.StateActive, berth.StateStopping, berth.StateStopped}
	var excluded []string
	i := 0
	for _, state := range states {
		for j, shape := range shapes {
			sess := newSession(fmt.Sprintf("ses_%03d", i), base.Add(time.Duration(i)*time.Millisecond))
			sess.Agent, sess.State = []string{"claude", "codex"}[i%2], state
			if state == berth.StateStopped {
				sess.StopReason = reasons[j%3]
			}
			shape(sess)
			create(t, s, sess)
			if sess.MaxCostUSD != nil || sess.MaxTokens != nil || j == 0 {
				spender := sess.ID
				if j%3 == 1 {
					c := child(sess.ID+"_child", sess.ID, sess.ID, 1, i)
					c.State = berth.StateStopped
					create(t, s, c)
					spender = c.ID
				}
				for range 3 {
					if _, err := s.AddUsage(ctx(t), spender, berth.Usage{ModelCalls: 1, InputTokens: 4, OutputTokens: 6, CostUSD: 0.1}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if i%5 == 1 {
				excluded = append(excluded, sess.ID)
			}
			i++
		}
	}
	return excluded
}
