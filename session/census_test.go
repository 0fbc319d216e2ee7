package session

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/sqlite"
)

// plainStore is a store that cannot count its sessions (its
// berth.SessionCounter is hidden): the census lists them instead.
type plainStore struct{ berth.Store }

// listCounter is a store that counts its sessions and the lists it is
// asked for.
type listCounter struct {
	*sqlite.Store
	lists atomic.Int64
	// excluded are the ids the last count left out.
	excluded []string
}

// CountSessions records the ids the store is asked to leave out, and
// counts.
func (l *listCounter) CountSessions(ctx context.Context, exclude []string) ([]berth.SessionCount, error) {
	l.excluded = slices.Clone(exclude)
	return l.Store.CountSessions(ctx, exclude)
}

// ListSessions counts the list and lists.
func (l *listCounter) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	l.lists.Add(1)
	return l.Store.ListSessions(ctx, f)
}

// The census counts sessions as the API lists them, with a store that
// counts its sessions (reading none whole: no list) and with one that
// does not: live ones with their live badge, stored ones (stopped,
// failed, another node's starting, active or stopping ones with every
// badge they can show, over budget through a child's spending) as stored.
func TestCensusAgreesWithTheList(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(berth.Store) berth.Store
	}{
		{"counting store", func(s berth.Store) berth.Store { return &listCounter{Store: s.(*sqlite.Store)} }},
		{"listing store", func(s berth.Store) berth.Store { return plainStore{s} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, home: t.TempDir(), wrap: c.wrap}
			e.open()
			t.Cleanup(e.close)
			_, counts := e.m.store.(berth.SessionCounter)
			if counts != (c.name == "counting store") {
				t.Fatalf("the store counts: %v", counts)
			}
			ctx := context.Background()
			e.create(berth.CreateRequest{})
			e.create(berth.CreateRequest{})
			stopped := e.create(berth.CreateRequest{})
			if _, err := e.m.StopSession(ctx, stopped.ID); err != nil {
				t.Fatal(err)
			}
			storeMix(t, e)
			censusMatchesList(t, e, 12)
		})
	}
}

// censusMatchesList checks that the census counts e's sessions as its list
// shows them, in groups groups, and (with a listCounter) reads none whole.
func censusMatchesList(t *testing.T, e *env, groups int) {
	t.Helper()
	ctx := context.Background()
	want := map[string]int{}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Sessions {
		want[fmt.Sprintf("%s/%s/%s", s.State, s.Badge, s.Agent)]++
	}
	lc, _ := e.m.store.(*listCounter)
	lists := int64(0)
	if lc != nil {
		lists = lc.lists.Load()
	}
	census, err := e.m.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lc != nil && lc.lists.Load() != lists {
		t.Errorf("the census read sessions whole: %d lists", lc.lists.Load()-lists)
	}
	got := map[string]int{}
	for _, n := range census.Sessions {
		got[fmt.Sprintf("%s/%s/%s", n.State, n.Badge, n.Agent)] += n.Sessions
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != groups {
		t.Fatalf("census %v\nlist   %v", got, want)
	}
}

// Sessions a boot is reattaching count as stored: by the store until the
// boot has read them whole, then from the daemon's memory, the store
// asked to leave them out of its count (it would parse each one's
// document while the cores reattach them); the census agrees with the
// list before the boot's read, during the boot and after it.
func TestCensusCountsReattachingSessionsFromMemory(t *testing.T) {
	e := &env{t: t, home: t.TempDir(), wrap: func(s berth.Store) berth.Store { return &listCounter{Store: s.(*sqlite.Store)} }}
	e.open()
	t.Cleanup(e.close)
	ctx := context.Background()
	e.create(berth.CreateRequest{})
	storeMix(t, e)
	page, err := e.store.ListSessions(ctx, berth.SessionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var attach []berth.LiveSession
	var ids []string
	for _, s := range page.Sessions {
		if s.State != berth.StateStopped && e.m.set.liveOf(s.ID) == nil {
			attach = append(attach, berth.LiveSession{ID: s.ID, State: s.State})
			ids = append(ids, s.ID)
		}
	}
	if len(attach) != 9 {
		t.Fatalf("%d sessions to reattach, want the 9 stored starting, active and stopping ones", len(attach))
	}
	e.m.set.boot(attach)
	lc := e.m.store.(*listCounter)
	// Not yet read: the store counts them.
	censusMatchesList(t, e, 12)
	if slices.Contains(lc.excluded, ids[0]) {
		t.Fatalf("the store was asked to leave out %s before the boot read it", ids[0])
	}
	rec, err := e.store.ListRecovery(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	e.m.set.bootRead(rec)
	censusMatchesList(t, e, 12)
	for _, id := range ids {
		if !slices.Contains(lc.excluded, id) {
			t.Fatalf("the store was asked to count %s, which the boot reattaches (left out: %v)", id, lc.excluded)
		}
	}
	for _, id := range ids {
		e.m.set.booted(id)
	}
	censusMatchesList(t, e, 12)
	if slices.Contains(lc.excluded, ids[0]) {
		t.Fatalf("the store was not asked to count %s once its reattach was over", ids[0])
	}
}

// storeMix stores sessions no live session drives: stopped, failed, and
// another node's of every state and badge.
func storeMix(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	for i, s := range []berth.Session{
		{Agent: "demo", State: berth.StateStopped, StopReason: berth.StopAgentCrashed},
		{Agent: "other", State: berth.StateStopped, StopReason: berth.StopUserRequested},
		{Agent: "other", State: berth.StateStopped, StopReason: berth.StopUserRequested,
			Failure: &berth.Failure{Kind: berth.FailInternal, Message: "x"}},
		// What a stopped session's badge does not read.
		{Agent: "demo", State: berth.StateStopped, StopReason: berth.StopUserRequested, PendingPermissions: 1,
			NeedsAuth: true, Auth: &berth.SessionAuth{Missing: "anthropic"}},
		{Agent: "other", State: berth.StateStarting},
		{Agent: "other", State: berth.StateStarting, NeedsAuth: true},
		{Agent: "other", State: berth.StateActive},
		{Agent: "other", State: berth.StateActive, PendingPermissions: 1},
		{Agent: "other", State: berth.StateActive, PendingElicitations: 1},
		{Agent: "other", State: berth.StateActive, Auth: &berth.SessionAuth{Missing: "anthropic"}},
		// Its child's spending, 0.1 thrice (0.30000000000000004), reaches it.
		{Agent: "other", State: berth.StateActive, MaxCostUSD: new(0.3)},
		{Agent: "other", State: berth.StateActive, MaxCostUSD: new(0.31)},
		{Agent: "demo", State: berth.StateStopping},
	} {
		s.ID, s.Workspace, s.Labels = fmt.Sprintf("ses_stored%02d", i), e.home, map[string]string{}
		s.RootID, s.CreatedAt, s.UpdatedAt, s.LastActivityAt = s.ID, now, now, now
		if err := e.store.CreateSession(ctx, &s); err != nil {
			t.Fatal(err)
		}
		if s.MaxCostUSD == nil {
			continue
		}
		child := berth.Session{ID: s.ID + "_child", Agent: "other", State: berth.StateStopped, StopReason: berth.StopUserRequested,
			Workspace: e.home, Labels: map[string]string{}, ParentID: s.ID, RootID: s.ID, Depth: 1,
			CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
		if err := e.store.CreateSession(ctx, &child); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := e.store.AddUsage(ctx, child.ID, berth.Usage{ModelCalls: 1, InputTokens: 10, CostUSD: 0.1}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
