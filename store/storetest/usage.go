package storetest

import (
	"sync"
	"testing"

	"github.com/berth-sh/berth"
)

// call is the usage of one model call of n tokens of each kind costing
// cost.
func call(n int64, cost float64) berth.Usage {
	return berth.Usage{ModelCalls: 1, InputTokens: n, OutputTokens: 2 * n, CacheReadTokens: 3 * n, CacheWriteTokens: 4 * n, CostUSD: cost}
}

// counts is u without its Tree.
func counts(u berth.Usage) berth.Usage {
	u.Tree = nil
	return u
}

// testAddUsage: a call adds to the session's own usage and to its tree's,
// and to every ancestor's tree usage alone; the answer is the session
// then its ancestors up to the root, with their budgets; a session shows a
// tree usage once a descendant has called; UpdateSession and a list keep
// and show it; bad deltas and unknown sessions are refused.
func testAddUsage(t *testing.T, open Opener) {
	s := fresh(t, open)
	r := newSession("r", base)
	r.MaxCostUSD, r.MaxTokens = new(5.0), new(int64(1000))
	create(t, s, r, child("a", "r", "r", 1, 1), child("a1", "a", "r", 2, 2), child("b", "r", "r", 1, 3))

	got, err := s.AddUsage(ctx(t), "a1", call(10, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	checkFirstCall(t, got)

	if _, err := s.AddUsage(ctx(t), "r", call(1, 0.25)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddUsage(ctx(t), "b", call(2, 0.125)); err != nil {
		t.Fatal(err)
	}
	root := get(t, s, "r")
	if counts(root.Usage) != call(1, 0.25) || root.Usage.Tree == nil {
		t.Fatalf("root usage %+v", root.Usage)
	}
	want := call(13, 0.875)
	want.ModelCalls = 3
	if *root.Usage.Tree != want {
		t.Fatalf("root tree usage %+v, want %+v", *root.Usage.Tree, want)
	}
	if b := get(t, s, "b"); b.Usage.Tree != nil || counts(b.Usage) != call(2, 0.125) {
		t.Fatalf("b usage %+v", b.Usage)
	}

	checkUsageKept(t, s, root, want)

	_, err = s.AddUsage(ctx(t), "nope", call(1, 0))
	wantCode(t, err, berth.ENotFound)
	_, err = s.AddUsage(ctx(t), "r", berth.Usage{InputTokens: -1})
	wantCode(t, err, berth.EInvalid)
	if again := get(t, s, "r"); *again.Usage.Tree != want {
		t.Fatalf("a refused delta moved the usage to %+v", *again.Usage.Tree)
	}
}

// checkFirstCall checks the answer to a1's first call: a1, a and r with
// r's budgets, a1's own usage, a's tree usage alone.
func checkFirstCall(t *testing.T, got []berth.SessionUsage) {
	t.Helper()
	var path []string
	for _, u := range got {
		path = append(path, u.ID)
	}
	if len(got) != 3 || path[0] != "a1" || path[1] != "a" || path[2] != "r" || got[0].ParentID != "a" {
		t.Fatalf("AddUsage answered %v, want a1 a r", path)
	}
	if got[2].MaxCostUSD == nil || *got[2].MaxCostUSD != 5 || got[2].MaxTokens == nil || *got[2].MaxTokens != 1000 {
		t.Fatalf("the root's budgets answered %v %v", got[2].MaxCostUSD, got[2].MaxTokens)
	}
	if got[0].Usage.Tree != nil || counts(got[0].Usage) != call(10, 0.5) {
		t.Fatalf("a1's usage answered %+v", got[0].Usage)
	}
	if got[1].Usage.ModelCalls != 0 || got[1].Usage.Tree == nil || *got[1].Usage.Tree != call(10, 0.5) {
		t.Fatalf("a's usage answered %+v (tree %+v)", got[1].Usage, got[1].Usage.Tree)
	}
}

// checkUsageKept checks that UpdateSession neither moves nor clears the
// root's tree usage (want), and that lists show it and b's own.
func checkUsageKept(t *testing.T, s berth.Store, root *berth.Session, want berth.Usage) {
	t.Helper()
	root.Usage = berth.Usage{}
	root.Name = "renamed"
	if err := s.UpdateSession(ctx(t), root, ""); err != nil {
		t.Fatal(err)
	}
	if again := get(t, s, "r"); again.Usage.Tree == nil || *again.Usage.Tree != want || again.Name != "renamed" {
		t.Fatalf("after an update the root reads %+v", again.Usage)
	}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Root: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range page.Sessions {
		if sess.ID == "r" && (sess.Usage.Tree == nil || *sess.Usage.Tree != want) {
			t.Fatalf("the list shows the root's usage %+v", sess.Usage)
		}
	}
	labelled, err := s.ListSessions(ctx(t), berth.SessionFilter{Labels: map[string]string{"team": "core"}, Parent: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range labelled.Sessions {
		if sess.ID == "b" && counts(sess.Usage) != call(2, 0.125) {
			t.Fatalf("a list by label shows b's usage %+v", sess.Usage)
		}
	}
}

// testAddUsageConcurrent: calls of a parent and of its two children at
// once all add up, in each and in the parent's tree; and the usage
// outlives the store.
func testAddUsageConcurrent(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	create(t, s, newSession("p", base), child("c1", "p", "p", 1, 1), child("c2", "p", "p", 1, 2))
	const each = 20
	var wg sync.WaitGroup
	for _, id := range []string{"p", "c1", "c2"} {
		for range each {
			wg.Go(func() {
				if _, err := s.AddUsage(ctx(t), id, call(1, 0.5)); err != nil {
					t.Errorf("add usage of %s: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	t.Cleanup(func() { _ = s.Close() })
	p := get(t, s, "p")
	if p.Usage.ModelCalls != each || p.Usage.Tree == nil || p.Usage.Tree.ModelCalls != 3*each ||
		p.Usage.Tree.OutputTokens != 3*each*2 || p.Usage.Tree.CostUSD != 3*each*0.5 {
		t.Fatalf("p after %d calls each of p, c1, c2: %+v (tree %+v)", each, p.Usage, p.Usage.Tree)
	}
	if c := get(t, s, "c2"); c.Usage.ModelCalls != each || c.Usage.CacheWriteTokens != each*4 {
		t.Fatalf("c2: %+v", c.Usage)
	}
}
