package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/session/live"

	"github.com/berth-sh/berth"
)

// Regressions of the races the chaos test found (chaos_test.go).

// A stop that lands while a resume is handshaking used to interrupt it:
// the resumed live session logged a second session_stopped with no
// session_started since the first. The stop now waits for the resume's
// handshake, so each session_started is closed by exactly one
// session_stopped.
func TestStopRacingResumeLogsOneStopPerStart(t *testing.T) {
	slow := berth.AgentSpec{Name: "slow-handshake", Command: "/bin/sh", Args: []string{"-c",
		`read l; sleep 0.3; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}'; ` +
			`read l; printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'; exec sleep 3600`}}
	e := newEnv(t, withAgents(slow))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: slow.Name})
	if s.State != berth.StateActive {
		t.Fatalf("created %+v", s)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		done := make(chan error, 1)
		go func() {
			_, err := e.m.ResumeSession(ctx, s.ID)
			done <- err
		}()
		// Stop while the resumed agent is still in its handshake.
		waitFor(t, "the resume to be live", func() bool { return e.m.set.liveOf(s.ID) != nil })
		if _, err := e.m.StopSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil && !berth.IsCode(err, berth.EConflict) {
			t.Fatalf("round %d: resume = %v", round, err)
		}
		if got, _ := e.m.GetSession(ctx, s.ID); got.State != berth.StateStopped {
			t.Fatalf("round %d: session %s after the stop", round, got.State)
		}
	}
	if bad := logInvariants(e.events(s.ID)); len(bad) > 0 {
		t.Fatalf("log %v:\n%v", types(e.events(s.ID)), bad)
	}
}

// A snapshot racing a delete used to archive a workspace being removed
// (500) and could leave an archive of the deleted session behind. Now the
// delete waits for the snapshot, or the snapshot finds the session gone.
func TestSnapshotRacingDeleteIsNotAnInternalError(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for round := range 6 {
		s := e.create(berth.CreateRequest{})
		// Enough files that archiving takes a while.
		for i := range 400 {
			dir := filepath.Join(s.Workspace, fmt.Sprintf("d%d", i%20))
			_ = os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), make([]byte, 512), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var snapErr, delErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, snapErr = e.m.CreateSnapshot(ctx, s.ID)
		}()
		go func() {
			defer wg.Done()
			<-start
			// Let the archive begin.
			time.Sleep(time.Duration(round) * 2 * time.Millisecond)
			delErr = e.m.DeleteSession(ctx, s.ID)
		}()
		close(start)
		wg.Wait()
		if delErr != nil {
			t.Fatalf("round %d: delete = %v", round, delErr)
		}
		if snapErr != nil && !berth.IsCode(snapErr, berth.ENotFound) && !berth.IsCode(snapErr, berth.EConflict) {
			t.Fatalf("round %d: snapshot racing delete = %v (code %s), want success, not_found or conflict",
				round, snapErr, berth.ErrorCode(snapErr))
		}
		if _, err := os.Stat(filepath.Join(e.home, "snapshots", s.ID)); !os.IsNotExist(err) {
			t.Fatalf("round %d: the deleted session's snapshots are still there (%v)", round, err)
		}
	}
}

// The event log used to report a failed append to whoever flushed next:
// a deleted session's late event (not_found) reached an unrelated
// session's ?wait=true. Each session now hears only of its own failures.
func TestAnotherSessionsLogFailureDoesNotReachWait(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.create(berth.CreateRequest{})
	turn := e.prompt(a.ID, "echo hi")
	if _, err := e.m.StopSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	b := e.create(berth.CreateRequest{})
	if err := e.m.DeleteSession(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	// A straggler of the deleted session (a terminal waiter, a late
	// stderr line) appends after the delete; nobody waits for it.
	if err := e.log.Append(ctx, berth.NewEvent(b.ID, "", berth.EventAgentStderr, live.StderrData{Line: "late"})); err != nil {
		t.Fatal(err)
	}
	// The stopped session's turn is rebuilt from its log, after a flush.
	res, err := e.m.WaitTurn(ctx, a.ID, turn.TurnID)
	if err != nil {
		t.Fatalf("wait on %s after %s was deleted = %v", a.ID, b.ID, err)
	}
	if res.Text != "hi" {
		t.Fatalf("turn = %+v", res)
	}
}

// deleteHookStore runs a hook before DeleteSession.
type deleteHookStore struct {
	berth.Store
	beforeDelete func(id string)
}

func (d *deleteHookStore) DeleteSession(ctx context.Context, id string) error {
	if d.beforeDelete != nil {
		d.beforeDelete(id)
	}
	return d.Store.DeleteSession(ctx, id)
}

// A resume that came between a delete's stop and its removal of the
// record started an agent for a session being deleted: the agent ran on,
// live, for a session that no longer existed. Now the delete holds the
// session's lock: the resume waits for it and then finds the session gone.
func TestResumeDuringDeleteLeavesNothingRunning(t *testing.T) {
	ds := &deleteHookStore{}
	e := newEnv(t, func(o *Options) { ds.Store = o.Store; o.Store = ds })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	ds.beforeDelete = func(id string) {
		// The delete has stopped the session; a resume comes now.
		go func() {
			_, err := e.m.ResumeSession(ctx, id)
			resumed <- err
		}()
		// Give it the time to get live (it must not, holding off until
		// the delete is over).
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			if ls := e.m.set.liveOf(id); ls != nil && ls.View().State == berth.StateActive {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := e.m.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-resumed; !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("resume during delete = %v, want not_found", err)
	}
	if ls := e.m.set.liveOf(s.ID); ls != nil {
		t.Errorf("a runtime of the deleted session is live (%s)", ls.View().State)
		ls.Stop(ctx, berth.StopUserRequested, nil)
	}
	waitFor(t, "the deleted session's processes to end", func() bool { return len(sessionPIDs(s.ID)) == 0 })
}
