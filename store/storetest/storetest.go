// Package storetest is the conformance suite of berth.Store: every backend
// runs RunStoreTests from its own tests, so they all behave alike.
//
//	func TestConformance(t *testing.T) {
//		storetest.RunStoreTests(t, func(t *testing.T, dir string) berth.Store {
//			s, err := sqlite.Open(context.Background(), filepath.Join(dir, "berth.db"), sqlite.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// Opener opens the store kept under dir. Given a new empty directory it
// returns an empty store; given the directory of a store that was closed it
// returns a store holding the same data (a server backend can map dir to a
// database or schema name). The suite closes every store it opens.
type Opener func(t *testing.T, dir string) berth.Store

// RunStoreTests runs the whole conformance suite against the backend that
// open opens, each case as a sub-test on a store of its own.
func RunStoreTests(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"CreateGet", testCreateGet},
		{"CreateConflict", testCreateConflict},
		{"CreateInvalid", testCreateInvalid},
		{"HiddenFieldsRoundTrip", testHiddenFields},
		{"MCPServersRoundTrip", testMCPServers},
		{"WorktreeMountsRoundTrip", testWorktreeMounts},
		{"ListOrder", testListOrder},
		{"ListFilters", testListFilters},
		{"ListPaging", testListPaging},
		{"ListLimits", testListLimits},
		{"ListMalformedCursor", testListMalformedCursor},
		{"Tree", testTree},
		{"SpawnKeyUnique", testSpawnKeyUnique},
		{"AddUsage", testAddUsage},
		{"AddUsageConcurrent", testAddUsageConcurrent},
		{"StorageSynced", testStorageSynced},
		{"UpdateGuard", testUpdateGuard},
		{"UpdateMissing", testUpdateMissing},
		{"UpdateKeepsLastSeq", testUpdateKeepsLastSeq},
		{"AgentOffsetIsTheHighWaterMark", testAgentOffset},
		{"UpdateLabels", testUpdateLabels},
		{"DeleteCascades", testDeleteCascades},
		{"AppendAndList", testAppendAndList},
		{"ListEventsEdges", testListEventsEdges},
		{"ListEventsClamp", testListEventsClamp},
		{"ListEventsMaxBytes", testListEventsMaxBytes},
		{"ListEventsFilters", testListEventsFilters},
		{"ListEventsTurnAcrossBatches", testListEventsTurnAcrossBatches},
		{"AppendManySessions", testAppendManySessions},
		{"LastSeqNeverMovesBack", testLastSeqNeverMovesBack},
		{"AppendInvalid", testAppendInvalid},
		{"AppendUnknownSession", testAppendUnknownSession},
		{"DuplicateSeqAllOrNothing", testDuplicateSeq},
		{"LargePayloadUnicode", testLargePayloadUnicode},
		{"ConcurrentAppend", testConcurrentAppend},
		{"ConcurrentReaders", testConcurrentReaders},
		{"Reopen", testReopen},
		{"PageEndOfMillion", testPageEndOfMillion},
		{"QueueFIFO", testQueueFIFO},
		{"QueueFull", testQueueFull},
		{"QueueCancel", testQueueCancel},
		{"QueueSteerReplaces", testQueueSteerReplaces},
		{"QueueClaimOnce", testQueueClaimOnce},
		{"QueueContent", testQueueContent},
		{"Permissions", testPermissions},
		{"Elicitations", testElicitations},
		{"ElicitationsReopen", testElicitationsReopen},
		{"Leases", testLeases},
		{"SideEntitiesCascade", testSideEntitiesCascade},
		{"ListRecovery", testListRecovery},
		{"ListLive", testListLive},
		{"CountSessions", testCountSessions},
		{"NodeRegistry", testNodeRegistry},
		{"NodeHeartbeat", testNodeHeartbeat},
		{"NodeMarkLost", testNodeMarkLost},
		{"NodeRestartKeepsLeases", testNodeRestartKeepsLeases},
		{"NodeLeave", testNodeLeave},
		{"NodeMarkLostConcurrent", testNodeMarkLostConcurrent},
		{"FenceTakeover", testFenceTakeover},
		{"FenceMissingSession", testFenceMissingSession},
		{"FenceNodeLost", testFenceNodeLost},
		{"FenceRace", testFenceRace},
		{"FenceConcurrentWriters", testFenceConcurrentWriters},
		{"Credentials", testCredentials},
		{"CredentialsInvalid", testCredentialsInvalid},
		{"CredentialsReopen", testCredentialsReopen},
		{"SignIns", testSignIns},
		{"SignInsSweep", testSignInsSweep},
		{"SignInsReopen", testSignInsReopen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// fresh opens an empty store that is closed when the test ends.
func fresh(t *testing.T, open Opener) berth.Store {
	t.Helper()
	s := open(t, t.TempDir())
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// ctx is the context of a test's store calls: bounded, so a deadlocked
// backend fails the test instead of hanging it (testenv.Context).
func ctx(t *testing.T) context.Context { return testenv.Context(t) }

// base is the creation time of the first test session; nanoseconds are
// set so that a backend that truncates times fails.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// newSession returns a session with most fields set.
func newSession(id string, created time.Time) *berth.Session {
	exp := created.Add(time.Hour)
	return &berth.Session{
		ID:               id,
		RootID:           id,
		Name:             "name of " + id,
		Agent:            "claude",
		State:            berth.StateStarting,
		Badge:            berth.BadgeStarting,
		Workspace:        "/srv/workspaces/" + id,
		ManagedWorkspace: true,
		Sandbox:          berth.SandboxSpec{Provider: "bwrap", Network: true},
		PermissionMode:   berth.PermAsk,
		ACP: berth.ACPInfo{SessionID: "acp-" + id, ProtocolVersion: 1,
			AgentInfo: json.RawMessage(`{"name":"agent","version":"1.2.3"}`)},
		Labels:             map[string]string{"team": "core"},
		CreatedAt:          created,
		UpdatedAt:          created.Add(time.Second),
		LastActivityAt:     created.Add(2 * time.Second),
		ExpiresAt:          &exp,
		TTLSeconds:         3600,
		IdleTimeoutSeconds: 600,
		Turns:              2,
		Queue:              berth.QueueInfo{Pending: 1, Generation: 7},
	}
}

// create stores sessions or fails the test.
func create(t *testing.T, s berth.Store, ss ...*berth.Session) {
	t.Helper()
	for _, sess := range ss {
		if err := s.CreateSession(ctx(t), sess); err != nil {
			t.Fatalf("create %s: %v", sess.ID, err)
		}
	}
}

// events builds n sequenced events of a session from seq first on, with
// types and turns that cycle so filters have something to select.
func events(sessionID string, first int64, n int) []berth.Event {
	types := []string{berth.EventAgentMessage, berth.EventToolCall, berth.EventUsage}
	out := make([]berth.Event, n)
	for i := range out {
		seq := first + int64(i)
		out[i] = berth.Event{
			Seq:       seq,
			SessionID: sessionID,
			TurnID:    fmt.Sprintf("turn-%d", seq%4),
			Type:      types[seq%int64(len(types))],
			Time:      base.Add(time.Duration(seq) * time.Millisecond).Add(time.Duration(seq)),
			Data:      json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"event %d"}`, seq, seq)),
		}
	}
	return out
}

// appendOK appends events or fails the test.
func appendOK(t *testing.T, s berth.Store, evs []berth.Event) {
	t.Helper()
	if err := s.AppendEvents(ctx(t), evs); err != nil {
		t.Fatalf("append %d events: %v", len(evs), err)
	}
}

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := berth.ErrorCode(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

// get reads a session or fails the test.
func get(t *testing.T, s berth.Store, id string) *berth.Session {
	t.Helper()
	sess, err := s.GetSession(ctx(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return sess
}

// list reads all events of a session after a position, page by page.
func list(t *testing.T, s berth.Store, id string, after int64) []berth.Event {
	t.Helper()
	return walk(t, s, id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit})
}

// walk reads the events of a session that f selects from f.After on,
// each page after the last seq of the one before, until one is empty.
func walk(t *testing.T, s berth.Store, id string, f berth.EventFilter) []berth.Event {
	t.Helper()
	var all []berth.Event
	for {
		page := listPage(t, s, id, f)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		f.After = page[len(page)-1].Seq
	}
}

// listPage reads one page of a session's events or fails the test.
func listPage(t *testing.T, s berth.Store, id string, f berth.EventFilter) []berth.Event {
	t.Helper()
	evs, err := s.ListEvents(ctx(t), id, f)
	if err != nil {
		t.Fatalf("list events of %s, %+v: %v", id, f, err)
	}
	return evs
}

// agentOffset reads a session's agent offset (through GetSession) or fails
// the test.
func agentOffset(t *testing.T, s berth.Store, id string) int64 {
	t.Helper()
	return get(t, s, id).AgentOffset
}

// lastSeq reads a session's last seq or fails the test.
func lastSeq(t *testing.T, s berth.Store, id string) int64 {
	t.Helper()
	n, err := s.LastSeq(ctx(t), id)
	if err != nil {
		t.Fatalf("last seq of %s: %v", id, err)
	}
	return n
}

// sameSession fails the test unless two sessions are equal field by field
// (times compared as instants).
func sameSession(t *testing.T, got, want *berth.Session) {
	t.Helper()
	g, w := normalise(got), normalise(want)
	gj, _ := json.Marshal(g)
	wj, _ := json.Marshal(w)
	if string(gj) != string(wj) {
		t.Fatalf("session differs:\n got %s\nwant %s", gj, wj)
	}
	if fmt.Sprint(got.Env) != fmt.Sprint(want.Env) || got.AgentPID != want.AgentPID || got.NeedsAuth != want.NeedsAuth ||
		got.ShimSocket != want.ShimSocket || got.ShimPID != want.ShimPID || got.AgentOffset != want.AgentOffset {
		t.Fatalf("hidden fields differ:\n got env=%v pid=%d auth=%v shim=%q/%d offset=%d\nwant env=%v pid=%d auth=%v shim=%q/%d offset=%d",
			got.Env, got.AgentPID, got.NeedsAuth, got.ShimSocket, got.ShimPID, got.AgentOffset,
			want.Env, want.AgentPID, want.NeedsAuth, want.ShimSocket, want.ShimPID, want.AgentOffset)
	}
}

// normalise copies a session with its times in UTC, so that JSON compares
// instants and not locations.
func normalise(s *berth.Session) berth.Session {
	c := *s
	c.CreatedAt, c.UpdatedAt, c.LastActivityAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC(), c.LastActivityAt.UTC()
	if c.ExpiresAt != nil {
		e := c.ExpiresAt.UTC()
		c.ExpiresAt = &e
	}
	return c
}

// sameEvents fails the test unless two event lists are equal.
func sameEvents(t *testing.T, got, want []berth.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.SessionID != w.SessionID || g.TurnID != w.TurnID || g.Type != w.Type ||
			!g.Time.Equal(w.Time) || string(g.Data) != string(w.Data) {
			t.Fatalf("event %d differs:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// onceEach fails the test unless counts, of what concurrent callers got,
// holds n ids, each got once.
func onceEach(t *testing.T, what string, counts map[string]int, n int) {
	t.Helper()
	if len(counts) != n {
		t.Fatalf("%d distinct of %d: %s", len(counts), n, what)
	}
	for id, c := range counts {
		if c != 1 {
			t.Fatalf("%s %s %d times, want once", what, id, c)
		}
	}
}

// seqs returns the seqs of events.
func seqs(evs []berth.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// contiguous fails the test unless evs have seqs from, from+1, ….
func contiguous(t *testing.T, evs []berth.Event, from int64) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (seqs %v…)", i, e.Seq, from+int64(i), seqs(evs[:min(len(evs), 20)]))
		}
	}
}
