package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim/shimcmd"

	live "github.com/berth-sh/berth/session/live"
)

// runShim is the test binary as a shim: the shim program's body (what
// `berth shim` and berth-shim run), with the host and bwrap providers.
func runShim() int {
	if err := shimcmd.Run(context.Background(), shimcmd.Options{}, os.Stdin, os.Stdout, shimcmd.Local); err != nil {
		return 1
	}
	return 0
}

// withShims runs agents in shims (this test binary as the shim).
func withShims(home string) func(*Options) {
	return func(o *Options) {
		self, _ := os.Executable()
		o.Shim = &live.ShimOptions{Argv: []string{self}, Env: []string{agentEnvVar + "=shim"}}
		o.RunDir = filepath.Join(home, "run")
		_ = os.MkdirAll(o.RunDir, 0o700)
	}
}

// closeAndWaitShims closes the manager (stopping every session) and waits
// until the shims of the sessions are gone, also those a manager before
// it started (its reapers end with them).
func (e *env) closeAndWaitShims(ids ...string) {
	e.t.Helper()
	var pids []int
	for _, id := range ids {
		if s, err := e.store.GetSession(context.Background(), id); err == nil && s.ShimPID > 0 {
			pids = append(pids, s.ShimPID)
		}
	}
	e.close()
	for _, pid := range pids {
		waitFor(e.t, "the shim to exit", func() bool { return processGone(pid) })
	}
}

// newShimEnv is newEnv with agents in shims.
func newShimEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.close()
	e.open(withShims(e.home))
	return e
}

// detachAndReopen shuts the manager down leaving the agents in their
// shims, as berth serve does on SIGTERM, and opens a new one on the home.
func (e *env) detachAndReopen(tweak ...func(*Options)) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.m.Shutdown(ctx, false); err != nil {
		e.t.Fatal(err)
	}
	if err := e.log.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open(tweak...)
}

// A manager that shuts down leaving its agents running hands a turn in
// flight to the next one: the turn ends end_turn with everything the agent
// said, logged once, and the session stays active.
func TestDetachHandsATurnToTheNextManager(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	turn := e.startBusy(s.ID, "sleep 1200\necho done")

	e.detachAndReopen(withShims(e.home))
	if processGone(pid) {
		t.Fatal("the agent died with the manager")
	}
	res := e.waitResult(s.ID, turn)
	if res.StopReason != berth.TurnEndTurn || !strings.HasSuffix(res.Text, "done") {
		t.Fatalf("turn after reattach: %+v", res)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	ticks := 0
	for _, ev := range ofType(evs, berth.EventAgentMessage) {
		if strings.TrimSpace(string(ev.Data)) == `{"text":"."}` {
			ticks++
		}
	}
	if ticks != 11 {
		t.Fatalf("%d of 11 ticks logged across the restart", ticks)
	}
	got, _ := e.m.GetSession(context.Background(), s.ID)
	if got.State != berth.StateActive {
		t.Fatalf("session after reattach: %s", got.State)
	}
	if r := e.prompt(s.ID, "echo again"); r.Text != "again" {
		t.Fatalf("prompt after reattach: %+v", r)
	}
	e.closeAndWaitShims(s.ID)
}

// A permission pending at the shutdown is pending in the next manager
// under the same id; deciding it there completes the turn.
func TestDetachKeepsAPendingPermission(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "ask may I\necho after"})
	if err != nil {
		t.Fatal(err)
	}
	var perm *berth.Permission
	waitFor(t, "the permission request", func() bool { perm = e.pendingPermission(s.ID); return perm != nil })

	e.detachAndReopen(withShims(e.home))
	var again *berth.Permission
	waitFor(t, "the permission to be waited on again", func() bool {
		got, _ := e.m.GetSession(context.Background(), s.ID)
		again = e.pendingPermission(s.ID)
		return got != nil && got.PendingPermissions == 1
	})
	if again == nil || again.ID != perm.ID {
		t.Fatalf("pending after reattach = %+v, want %s", again, perm.ID)
	}
	if _, err := e.m.DecidePermission(context.Background(), s.ID, perm.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "permission: allow") || !strings.Contains(res.Text, "after") {
		t.Fatalf("turn after the decision: %+v", res)
	}
	if n := len(ofType(e.events(s.ID), berth.EventPermissionRequested)); n != 1 {
		t.Fatalf("%d permission_requested events, want 1", n)
	}
	e.closeAndWaitShims(s.ID)
}

// With stopSessions, shutting down stops the shim's agent and its shim.
func TestShutdownStopsShimmedAgents(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	e.close()
	waitFor(t, "the agent to be gone", func() bool { return processGone(pid) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(e.home, "run"))
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run directory not empty: %v", entries)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A shim whose session is not live at boot (here: stopped behind its back
// while the daemon was away) is an orphan: the next manager stops its
// agent, the shim exits, and its files go.
func TestBootEndsOrphanShims(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	stored, err := e.store.GetSession(context.Background(), s.ID)
	if err != nil || stored.ShimPID == 0 {
		t.Fatalf("stored session: %+v, %v", stored, err)
	}
	shimPID := stored.ShimPID
	ctx := context.Background()
	if err := e.m.Shutdown(ctx, false); err != nil {
		t.Fatal(err)
	}
	if processGone(pid) {
		t.Fatal("the agent died with the manager")
	}
	// The session is recorded stopped as if another daemon had closed it.
	stored.State, stored.StopReason = berth.StateStopped, berth.StopDaemonCrashed
	if err := e.store.UpdateSession(ctx, stored, berth.StateActive); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.open(withShims(e.home))
	waitFor(t, "the orphan's agent to be gone", func() bool { return processGone(pid) })
	waitFor(t, "the orphan shim to exit", func() bool { return processGone(shimPID) })
	waitFor(t, "the orphan's files to go", func() bool {
		entries, _ := os.ReadDir(filepath.Join(e.home, "run"))
		return len(entries) == 0
	})
}

// flakyRecoveryStore fails the first reads of what live sessions hold,
// and records how many sessions each read asked for.
type flakyRecoveryStore struct {
	berth.Store
	fails atomic.Int32
	mu    sync.Mutex
	reads []int
}

func (s *flakyRecoveryStore) ListRecovery(ctx context.Context, ids []string) (map[string]*berth.Recovery, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, berth.Errorf(berth.EUnavailable, "the store is not answering")
	}
	s.mu.Lock()
	s.reads = append(s.reads, len(ids))
	s.mu.Unlock()
	return s.Store.ListRecovery(ctx, ids)
}

// The boot reads the sessions it reattaches recoveryChunk at a time, each
// chunk's sessions reattached as that read found them: every one comes
// back live, its agent untouched, and answers a prompt.
func TestTheBootReadsItsSessionsAChunkAtATime(t *testing.T) {
	defer func(n int) { recoveryChunk = n }(recoveryChunk)
	recoveryChunk = 2
	e := newShimEnv(t)
	var ids []string
	pids := map[string]int{}
	for range 5 {
		s := e.create(berth.CreateRequest{})
		ids = append(ids, s.ID)
		pids[s.ID] = e.agentPID(s.ID)
	}
	reads := &flakyRecoveryStore{}
	e.wrap = func(st berth.Store) berth.Store { reads.Store = st; return reads }
	e.detachAndReopen(withShims(e.home))
	<-e.m.Booted()
	reads.mu.Lock()
	got := fmt.Sprint(reads.reads)
	reads.mu.Unlock()
	if got != "[2 2 1]" {
		t.Fatalf("the boot's recovery reads asked for %s sessions, want [2 2 1]", got)
	}
	for _, id := range ids {
		if processGone(pids[id]) {
			t.Fatalf("%s: the agent was ended by the boot", id)
		}
		if r := e.prompt(id, "echo back"); r.Text != "back" {
			t.Fatalf("%s: prompt after the boot: %+v", id, r)
		}
	}
	e.closeAndWaitShims(ids...)
}

// The boot reads what the live sessions hold after the manager has
// opened: a read that fails is tried again, and the session is reattached
// (its agent untouched), not closed as one gone from the store.
func TestTheBootReadsItsSessionsAgainAfterAFailure(t *testing.T) {
	defer func(d time.Duration) { recoveryRetry = d }(recoveryRetry)
	recoveryRetry = 20 * time.Millisecond
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	pid := e.agentPID(s.ID)
	flaky := &flakyRecoveryStore{}
	flaky.fails.Store(3)
	e.wrap = func(st berth.Store) berth.Store { flaky.Store = st; return flaky }
	e.detachAndReopen(withShims(e.home))
	if n := flaky.fails.Load(); n > -1 {
		t.Fatalf("the boot read what the sessions hold %d times, want at least 4", 3-n)
	}
	if processGone(pid) {
		t.Fatal("the agent was ended by a boot whose read failed")
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil || got.State != berth.StateActive {
		t.Fatalf("session after the boot: %+v, %v", got, err)
	}
	if r := e.prompt(s.ID, "echo again"); r.Text != "again" {
		t.Fatalf("prompt after the boot: %+v", r)
	}
	e.closeAndWaitShims(s.ID)
}

// A boot publishes no change for a session it reattaches as clients
// listed it while it booted (no turn, its queue as stored): a thousand
// idle sessions cost a thousand encodings and publications of nothing new.
// One with a turn in flight is published with its turn.
func TestABootPublishesOnlyTheSessionsThatChanged(t *testing.T) {
	e := newShimEnv(t)
	idle := e.create(berth.CreateRequest{})
	busy := e.create(berth.CreateRequest{})
	turn := e.startBusy(busy.ID, "sleep 1200\necho done")

	e.detachAndReopen(withShims(e.home))
	<-e.m.Booted()
	// From the new daemon's first change on.
	w := e.watch(e.m.changes.feed.Epoch() + "-0")
	got := w.waitChange("the busy session published", func(c change) bool { return c.sess.ID == busy.ID })
	if got.sess.CurrentTurnID != turn || got.sess.Badge != berth.BadgeRunning {
		t.Fatalf("the busy session was published with turn %q, badge %s", got.sess.CurrentTurnID, got.sess.Badge)
	}
	if res := e.waitResult(busy.ID, turn); res.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn after reattach: %+v", res)
	}
	for _, c := range w.all() {
		if c.sess.ID == idle.ID {
			t.Fatalf("the idle session was published at the boot: %s %+v", c.Type, c.sess)
		}
	}
	if r := e.prompt(idle.ID, "echo again"); r.Text != "again" {
		t.Fatalf("prompt after reattach: %+v", r)
	}
	w.waitChange("the idle session published once prompted", func(c change) bool { return c.sess.ID == idle.ID })
	e.closeAndWaitShims(idle.ID, busy.ID)
}

// A session's durable offset passes the agent's answer that opened its
// conversation: the next daemon's reattach reads none of the handshake
// again (it read the answer, and dropped it, at every boot of every
// session never prompted), for the demo agent, whose updates come before
// its answer and are logged after session_started.
func TestAReattachReadsNoneOfTheHandshakeAgain(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	var daemonLog lockedBuffer
	e.detachAndReopen(withShims(e.home), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&daemonLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	<-e.m.Booted()
	if r := e.prompt(s.ID, "echo again"); r.Text != "again" {
		t.Fatalf("prompt after reattach: %+v", r)
	}
	if out := daemonLog.String(); strings.Contains(out, "no pending call") || !strings.Contains(out, "session reattached") {
		t.Fatalf("the reattach read the handshake's answer again:\n%s", out)
	}
	e.closeAndWaitShims(s.ID)
}
