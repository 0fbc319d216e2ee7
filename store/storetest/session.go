package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func testCreateGet(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.Failure = &berth.Failure{Kind: berth.FailStartup, Message: "boom"}
	create(t, s, want)
	sameSession(t, get(t, s, "s1"), want)

	_, err := s.GetSession(ctx(t), "nope")
	wantCode(t, err, berth.ENotFound)
	_, err = s.LastSeq(ctx(t), "nope")
	wantCode(t, err, berth.ENotFound)
	if n := lastSeq(t, s, "s1"); n != 0 {
		t.Fatalf("last seq of a new session = %d, want 0", n)
	}
}

func testCreateConflict(t *testing.T, open Opener) {
	s := fresh(t, open)
	first := newSession("s1", base)
	create(t, s, first)
	other := newSession("s1", base.Add(time.Hour))
	other.Name = "impostor"
	wantCode(t, s.CreateSession(ctx(t), other), berth.EConflict)
	sameSession(t, get(t, s, "s1"), first)
}

func testCreateInvalid(t *testing.T, open Opener) {
	s := fresh(t, open)
	wantCode(t, s.CreateSession(ctx(t), newSession("", base)), berth.EInvalid)
}

func testHiddenFields(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.Env = map[string]string{"API_KEY": "sk-secret", "EMPTY": ""}
	want.AgentPID = 4242
	want.NeedsAuth = true
	want.ShimSocket = "/run/berth/shims/s1.sock"
	want.ShimPID = 4241
	create(t, s, want)
	sameSession(t, get(t, s, "s1"), want)

	want.Env = map[string]string{"OTHER": "x"}
	want.AgentPID = 0
	want.NeedsAuth = false
	want.ShimSocket = ""
	want.ShimPID = 0
	if err := s.UpdateSession(ctx(t), want, ""); err != nil {
		t.Fatal(err)
	}
	sameSession(t, get(t, s, "s1"), want)
}

// testMCPServers checks that a session's MCP servers come back whole,
// secrets included (the API redacts them, the store must not), through
// create, get, list and update.
func testMCPServers(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.MCPServers = berth.MCPServers{
		{Name: "files", Type: berth.MCPStdio, Command: "/usr/bin/mcp-files", Args: []string{"--root", "/w"},
			Env: map[string]string{"API_KEY": "sk-stdio-secret"}},
		{Name: "docs", Type: berth.MCPHTTP, URL: "https://mcp.example/docs",
			Headers: map[string]string{"Authorization": "Bearer sk-http-secret"}},
	}
	create(t, s, want)
	roundTrips(t, s, "s1", func(what string, got *berth.Session) {
		if !slices.EqualFunc(got.MCPServers, want.MCPServers, berth.MCPServer.Equal) {
			t.Fatalf("%s: MCP servers %+v, want %+v", what, []berth.MCPServer(got.MCPServers), []berth.MCPServer(want.MCPServers))
		}
	})
}

// testWorktreeMounts checks that a session's worktree (its hidden
// directories and ownership included: the sandbox binds them and delete
// removes the worktree by them) and its mounts come back whole through
// create, get, list and update.
func testWorktreeMounts(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.Worktree = &berth.Worktree{Repo: "/src/app", Branch: "agent/one", Base: "main",
		GitDir: "/src/app/.git/worktrees/s1", CommonDir: "/src/app/.git", Owned: true}
	want.Mounts = []string{"gomod", "models"}
	create(t, s, want)
	roundTrips(t, s, "s1", func(what string, got *berth.Session) {
		if got.Worktree == nil || *got.Worktree != *want.Worktree {
			t.Fatalf("%s: worktree %+v, want %+v", what, got.Worktree, want.Worktree)
		}
		if !slices.Equal(got.Mounts, want.Mounts) {
			t.Fatalf("%s: mounts %v, want %v", what, got.Mounts, want.Mounts)
		}
	})

	// A child in its parent's worktree does not own it.
	child := newSession("s2", base)
	child.Worktree = &berth.Worktree{Repo: "/src/app", Branch: "agent/one", GitDir: "/g", CommonDir: "/c"}
	create(t, s, child)
	if got := get(t, s, "s2").Worktree; got == nil || got.Owned || got.GitDir != "/g" {
		t.Fatalf("child worktree %+v", got)
	}
}

// roundTrips calls same with session id as get reads it, as the list of
// the store's one session holds it and as get reads it after an update of
// another field (its name).
func roundTrips(t *testing.T, s berth.Store, id string, same func(what string, got *berth.Session)) {
	t.Helper()
	same("get", get(t, s, id))
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("list = %v, %v", page, err)
	}
	same("list", page.Sessions[0])
	next := get(t, s, id)
	next.Name = "renamed"
	if err := s.UpdateSession(ctx(t), next, ""); err != nil {
		t.Fatal(err)
	}
	same("after update", get(t, s, id))
}

func testListOrder(t *testing.T, open Opener) {
	s := fresh(t, open)
	// b and c share a creation time: the id breaks the tie, descending.
	create(t, s,
		newSession("a", base),
		newSession("b", base.Add(time.Minute)),
		newSession("c", base.Add(time.Minute)),
		newSession("d", base.Add(-time.Minute)),
		newSession("e", base.Add(time.Nanosecond)))
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(page), "c b e a d"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	if page.NextCursor != "" {
		t.Fatalf("next cursor %q on the only page", page.NextCursor)
	}
	for _, sess := range page.Sessions {
		sameSession(t, sess, get(t, s, sess.ID))
	}
}

func testListFilters(t *testing.T, open Opener) {
	s := fresh(t, open)
	mk := func(id string, state berth.State, agent, parent string, labels map[string]string, minute int) *berth.Session {
		sess := newSession(id, base.Add(time.Duration(minute)*time.Minute))
		sess.State, sess.Agent, sess.ParentID, sess.Labels = state, agent, parent, labels
		return sess
	}
	create(t, s,
		mk("p", berth.StateActive, "claude", "", map[string]string{"team": "core", "env": "prod"}, 0),
		mk("c1", berth.StateActive, "codex", "p", map[string]string{"team": "core"}, 1),
		mk("c2", berth.StateStopped, "claude", "p", map[string]string{"team": "web", "env": "prod"}, 2),
		mk("x", berth.StateStopped, "codex", "", nil, 3))
	listFiltered(t, s, []sessionCase{
		{berth.SessionFilter{State: berth.StateActive}, "c1 p"},
		{berth.SessionFilter{State: berth.StateStopped}, "x c2"},
		{berth.SessionFilter{State: berth.StateStarting}, ""},
		{berth.SessionFilter{Agent: "codex"}, "x c1"},
		{berth.SessionFilter{Parent: "p"}, "c2 c1"},
		{berth.SessionFilter{Labels: map[string]string{"team": "core"}}, "c1 p"},
		{berth.SessionFilter{Labels: map[string]string{"env": "prod"}}, "c2 p"},
		{berth.SessionFilter{Labels: map[string]string{"team": "core", "env": "prod"}}, "p"},
		{berth.SessionFilter{Labels: map[string]string{"team": "prod"}}, ""},
		{berth.SessionFilter{Labels: map[string]string{"nope": "core"}}, ""},
		{berth.SessionFilter{Agent: "claude", Parent: "p"}, "c2"},
		{berth.SessionFilter{State: berth.StateActive, Agent: "codex", Labels: map[string]string{"team": "core"}}, "c1"},
	})
}

// sessionCase is a filter and the ids ListSessions must answer it with.
type sessionCase struct {
	f    berth.SessionFilter
	want string
}

// listFiltered lists the sessions of s with each case's filter and
// compares the ids.
func listFiltered(t *testing.T, s berth.Store, cases []sessionCase) {
	t.Helper()
	for _, c := range cases {
		wantIDs(t, s, c.f, c.want)
	}
}

func testListPaging(t *testing.T, open Opener) {
	s := fresh(t, open)
	const n = 7
	for i := range n {
		sess := newSession(fmt.Sprintf("s%d", i), base.Add(time.Duration(i/2)*time.Second)) // pairs share a time
		sess.State = []berth.State{berth.StateActive, berth.StateStopped}[i%2]
		create(t, s, sess)
	}
	all, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// Pages of one, then of three, must together be the full list.
	for _, limit := range []int{1, 3} {
		var got []string
		f := berth.SessionFilter{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("limit %d: more pages than sessions", limit)
			}
			page, err := s.ListSessions(ctx(t), f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Sessions) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page.Sessions))
			}
			for _, sess := range page.Sessions {
				got = append(got, sess.ID)
			}
			if page.NextCursor == "" {
				break
			}
			f.Cursor = page.NextCursor
		}
		if fmt.Sprint(got) != fmt.Sprint(idList(all)) {
			t.Fatalf("limit %d: paged %v, want %v", limit, got, idList(all))
		}
	}
	// A page that ends exactly at the last session has no next cursor.
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != n || page.NextCursor != "" {
		t.Fatalf("limit = total: %d sessions, cursor %q", len(page.Sessions), page.NextCursor)
	}
	// A cursor past the end yields an empty page and no cursor: take the
	// cursor before the oldest session, then delete that session.
	page, err = s.ListSessions(ctx(t), berth.SessionFilter{Limit: n - 1})
	if err != nil {
		t.Fatal(err)
	}
	oldest := idList(all)[n-1]
	if err := s.DeleteSession(ctx(t), oldest); err != nil {
		t.Fatal(err)
	}
	past, err := s.ListSessions(ctx(t), berth.SessionFilter{Limit: 1, Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(past.Sessions) != 0 || past.NextCursor != "" {
		t.Fatalf("past the end: %q, cursor %q", ids(past), past.NextCursor)
	}
	create(t, s, newSession(oldest, base))
	// Paging composes with filters: the stopped ones, one at a time.
	var stopped []string
	f := berth.SessionFilter{State: berth.StateStopped, Limit: 1}
	for {
		page, err := s.ListSessions(ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sess := range page.Sessions {
			if sess.State != berth.StateStopped {
				t.Fatalf("filtered page holds %s in %s", sess.ID, sess.State)
			}
			stopped = append(stopped, sess.ID)
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	if len(stopped) != n/2 {
		t.Fatalf("paged %d stopped sessions, want %d", len(stopped), n/2)
	}
}

func testListLimits(t *testing.T, open Opener) {
	s := fresh(t, open)
	const n = 1005
	for i := range n {
		create(t, s, newSession(fmt.Sprintf("s%04d", i), base.Add(time.Duration(i)*time.Millisecond)))
	}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 50 || page.NextCursor == "" {
		t.Fatalf("default limit: %d sessions, cursor %q; want 50 and a cursor", len(page.Sessions), page.NextCursor)
	}
	if page.Sessions[0].ID != "s1004" {
		t.Fatalf("newest first: got %s", page.Sessions[0].ID)
	}
	page, err = s.ListSessions(ctx(t), berth.SessionFilter{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 1000 || page.NextCursor == "" {
		t.Fatalf("limit 5000: %d sessions, cursor %q; want 1000 and a cursor", len(page.Sessions), page.NextCursor)
	}
	rest, err := s.ListSessions(ctx(t), berth.SessionFilter{Limit: 1000, Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Sessions) != n-1000 || rest.NextCursor != "" {
		t.Fatalf("second page: %d sessions, cursor %q", len(rest.Sessions), rest.NextCursor)
	}
}

func testListMalformedCursor(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	for _, c := range []string{"!!!", "bm90LWEtY3Vyc29y", "%%", "eyJ4IjoxfQ"} {
		_, err := s.ListSessions(ctx(t), berth.SessionFilter{Cursor: c})
		wantCode(t, err, berth.EInvalid)
	}
}

func testUpdateGuard(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("s1", base)
	create(t, s, sess)

	// from matches: the write happens.
	sess.State = berth.StateActive
	sess.Badge = berth.BadgeIdle
	sess.Name = "renamed"
	if err := s.UpdateSession(ctx(t), sess, berth.StateStarting); err != nil {
		t.Fatal(err)
	}
	sameSession(t, get(t, s, "s1"), sess)

	// from does not match: EConflict and nothing changes.
	stale := *sess
	stale.State = berth.StateStopped
	stale.Name = "lost"
	wantCode(t, s.UpdateSession(ctx(t), &stale, berth.StateStarting), berth.EConflict)
	sameSession(t, get(t, s, "s1"), sess)

	// No from: unconditional.
	stale.Name = "forced"
	if err := s.UpdateSession(ctx(t), &stale, ""); err != nil {
		t.Fatal(err)
	}
	sameSession(t, get(t, s, "s1"), &stale)
	if page, _ := s.ListSessions(ctx(t), berth.SessionFilter{State: berth.StateStopped}); ids(page) != "s1" {
		t.Fatalf("state column not updated: stopped list %q", ids(page))
	}
}

func testUpdateMissing(t *testing.T, open Opener) {
	s := fresh(t, open)
	wantCode(t, s.UpdateSession(ctx(t), newSession("ghost", base), ""), berth.ENotFound)
	wantCode(t, s.UpdateSession(ctx(t), newSession("ghost", base), berth.StateStarting), berth.ENotFound)
}

func testUpdateKeepsLastSeq(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("s1", base)
	create(t, s, sess)
	appendOK(t, s, events("s1", 1, 5))

	// The caller's copy is stale (LastSeq 0, then a wrong 99): neither may
	// move the stored last seq.
	for _, stale := range []int64{0, 99} {
		sess.LastSeq = stale
		sess.Turns++
		if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, "s1")
		if got.LastSeq != 5 || lastSeq(t, s, "s1") != 5 {
			t.Fatalf("after update with LastSeq %d: stored %d / %d, want 5", stale, got.LastSeq, lastSeq(t, s, "s1"))
		}
		if got.Turns != sess.Turns {
			t.Fatalf("turns %d, want %d", got.Turns, sess.Turns)
		}
	}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 1 || page.Sessions[0].LastSeq != 5 {
		t.Fatalf("list does not report last seq 5: %+v", page.Sessions)
	}
}

func testAgentOffset(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("s1", base)
	sess.ShimSocket = "/run/berth/shims/s1.sock"
	sess.ShimPID = 5150
	// CreateSession ignores the caller's AgentOffset: only AppendEvents sets it.
	sess.AgentOffset = 999
	other := newSession("s2", base.Add(time.Second))
	create(t, s, sess, other)
	got := get(t, s, "s1")
	if got.AgentOffset != 0 || got.ShimSocket != sess.ShimSocket || got.ShimPID != sess.ShimPID {
		t.Fatalf("new session: agent offset %d, shim %q/%d; want 0, %q/%d",
			got.AgentOffset, got.ShimSocket, got.ShimPID, sess.ShimSocket, sess.ShimPID)
	}

	// sourced returns n events of a session from seq first on with the
	// given sources.
	sourced := func(id string, first int64, sources ...int64) []berth.Event {
		evs := events(id, first, len(sources))
		for i, src := range sources {
			evs[i].Source = src
		}
		return evs
	}
	wantOffsets := func(when string, want map[string]int64) {
		t.Helper()
		for id, w := range want {
			if n := agentOffset(t, s, id); n != w {
				t.Fatalf("%s: agent offset of %s = %d, want %d", when, id, n, w)
			}
		}
	}
	// The highest source of each session in the batch, not the last one,
	// and not another session's.
	s1 := sourced("s1", 1, 10, 0, 7)
	appendOK(t, s, []berth.Event{s1[0], s1[1], sourced("s2", 1, 3)[0], s1[2]})
	wantOffsets("first batch", map[string]int64{"s1": 10, "s2": 3})
	// A lower source never moves it back; a batch without sources neither.
	appendOK(t, s, sourced("s1", 4, 5))
	appendOK(t, s, events("s2", 2, 2))
	wantOffsets("lower sources", map[string]int64{"s1": 10, "s2": 3})
	appendOK(t, s, sourced("s1", 5, 0, 25))
	wantOffsets("higher source", map[string]int64{"s1": 25, "s2": 3})

	// It moves with the events or not at all: a batch that fails leaves
	// it where it was.
	wantCode(t, s.AppendEvents(ctx(t), sourced("s1", 6, 1000, 1000)), berth.EConflict)
	wantCode(t, s.AppendEvents(ctx(t), append(sourced("s1", 7, 2000), sourced("ghost", 1, 3000)...)), berth.ENotFound)
	wantOffsets("failed batches", map[string]int64{"s1": 25, "s2": 3})

	// UpdateSession writes the document, never the offset, whatever the
	// caller's copy says; the shim fields are written.
	sess.ShimSocket, sess.ShimPID = "/run/berth/shims/s1-b.sock", 5151
	for _, stale := range []int64{0, 999} {
		sess.AgentOffset = stale
		sess.Name = fmt.Sprintf("renamed with offset %d", stale)
		if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, "s1")
		if got.AgentOffset != 25 || got.Name != sess.Name || got.ShimSocket != sess.ShimSocket || got.ShimPID != sess.ShimPID {
			t.Fatalf("after update with AgentOffset %d: offset %d (want 25), name %q, shim %q/%d",
				stale, got.AgentOffset, got.Name, got.ShimSocket, got.ShimPID)
		}
	}
	if n := lastSeq(t, s, "s1"); n != 6 {
		t.Fatalf("last seq %d, want 6", n)
	}

	// Lists read the same column, with and without a label filter.
	for _, f := range []berth.SessionFilter{{}, {Labels: map[string]string{"team": "core"}}, {Agent: "claude"}} {
		page, err := s.ListSessions(ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		if ids(page) != "s2 s1" {
			t.Fatalf("list %+v: %q", f, ids(page))
		}
		if a, b := page.Sessions[1].AgentOffset, page.Sessions[0].AgentOffset; a != 25 || b != 3 {
			t.Fatalf("list %+v: agent offsets s1=%d s2=%d, want 25, 3", f, a, b)
		}
		if got := page.Sessions[1]; got.ShimSocket != sess.ShimSocket || got.ShimPID != sess.ShimPID {
			t.Fatalf("list %+v: shim %q/%d", f, got.ShimSocket, got.ShimPID)
		}
	}
}

func testUpdateLabels(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("s1", base)
	create(t, s, sess)
	sess.Labels = map[string]string{"team": "web", "tier": "gold"}
	if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"team": "core"}, ""},
		{map[string]string{"team": "web"}, "s1"},
		{map[string]string{"tier": "gold", "team": "web"}, "s1"},
	} {
		page, err := s.ListSessions(ctx(t), berth.SessionFilter{Labels: c.labels})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page); got != c.want {
			t.Fatalf("labels %v: got %q, want %q", c.labels, got, c.want)
		}
	}
	sameSession(t, get(t, s, "s1"), sess)
}

func testDeleteCascades(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("gone", base), newSession("kept", base.Add(time.Second)))
	appendOK(t, s, append(events("gone", 1, 10), events("kept", 1, 3)...))

	if err := s.DeleteSession(ctx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetSession(ctx(t), "gone")
	wantCode(t, err, berth.ENotFound)
	_, err = s.LastSeq(ctx(t), "gone")
	wantCode(t, err, berth.ENotFound)
	if evs := list(t, s, "gone", 0); len(evs) != 0 {
		t.Fatalf("deleted session still has %d events", len(evs))
	}
	wantCode(t, s.DeleteSession(ctx(t), "gone"), berth.ENotFound)
	if page, _ := s.ListSessions(ctx(t), berth.SessionFilter{Labels: map[string]string{"team": "core"}}); ids(page) != "kept" {
		t.Fatalf("label rows survived the delete: %q", ids(page))
	}

	// The other session is untouched, and the id can start over from 1.
	sameEvents(t, list(t, s, "kept", 0), events("kept", 1, 3))
	create(t, s, newSession("gone", base))
	if n := lastSeq(t, s, "gone"); n != 0 {
		t.Fatalf("recreated session has last seq %d", n)
	}
	appendOK(t, s, events("gone", 1, 1))
}

// wantIDs fails the test unless the sessions f selects (one page) have
// the ids want lists, space separated.
func wantIDs(t *testing.T, s berth.Store, f berth.SessionFilter, want string) {
	t.Helper()
	page, err := s.ListSessions(ctx(t), f)
	if err != nil {
		t.Fatalf("%+v: %v", f, err)
	}
	if got := ids(page); got != want {
		t.Errorf("filter %+v: got %q, want %q", f, got, want)
	}
}

// ids lists the session ids of a page, space separated.
func ids(p *berth.SessionPage) string {
	if p == nil {
		return "<nil page>"
	}
	out := ""
	for i, s := range p.Sessions {
		if i > 0 {
			out += " "
		}
		out += s.ID
	}
	return out
}

// idList lists the session ids of a page.
func idList(p *berth.SessionPage) []string {
	out := make([]string, len(p.Sessions))
	for i, s := range p.Sessions {
		out[i] = s.ID
	}
	return out
}
