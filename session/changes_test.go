package session

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
)

// change is one decoded change of the all-sessions stream.
type change struct {
	berth.SessionChange
	sess berth.Session
}

// watcher reads a change stream in the background.
type watcher struct {
	t      *testing.T
	mu     sync.Mutex
	got    []change
	cursor int // waitChange looks from here on
	cancel context.CancelFunc
	done   chan struct{}
}

// watch follows the manager's changes from lastID until the test ends.
func (e *env) watch(lastID string) *watcher {
	e.t.Helper()
	st, err := e.m.StreamChanges(context.Background(), lastID)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{t: e.t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer st.Close()
		for {
			cs, err := st.Next(ctx)
			if err != nil {
				return
			}
			for _, c := range cs {
				ch := change{SessionChange: c}
				if c.Type != berth.ChangeResync {
					if err := json.Unmarshal(c.Data, &ch.sess); err != nil {
						e.t.Errorf("change %s: %v", c.ID, err)
					}
				}
				w.mu.Lock()
				w.got = append(w.got, ch)
				w.mu.Unlock()
			}
		}
	}()
	e.t.Cleanup(w.stop)
	return w
}

// stop ends the watcher and waits for it.
func (w *watcher) stop() { w.cancel(); <-w.done }

// all returns what was read so far.
func (w *watcher) all() []change {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]change(nil), w.got...)
}

// waitChange waits for the first change after the cursor that matches, and
// moves the cursor past it: successive calls check an order.
func (w *watcher) waitChange(what string, match func(change) bool) change {
	w.t.Helper()
	var found change
	waitFor(w.t, what, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i := w.cursor; i < len(w.got); i++ {
			if match(w.got[i]) {
				found, w.cursor = w.got[i], i+1
				return true
			}
		}
		return false
	})
	return found
}

// updated matches a session_updated of session id for which ok holds.
func updated(id string, ok func(s berth.Session) bool) func(change) bool {
	return func(c change) bool {
		return c.Type == berth.ChangeSessionUpdated && c.sess.ID == id && ok(c.sess)
	}
}

func TestChangeStreamShowsEveryKindOfChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := e.watch("")
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk, Name: "watched", Labels: map[string]string{"team": "web"}})

	c := w.waitChange("session_created", func(c change) bool { return c.Type == berth.ChangeSessionCreated })
	if c.sess.ID != s.ID || c.sess.State != berth.StateStarting || c.sess.Name != "watched" ||
		c.sess.Labels["team"] != "web" || c.sess.Agent != "demo" {
		t.Fatalf("session_created: %+v", c.sess)
	}
	w.waitChange("active and idle", updated(s.ID, func(s berth.Session) bool {
		return s.State == berth.StateActive && s.Badge == berth.BadgeIdle
	}))

	// A turn: running, then idle with one more turn counted.
	e.prompt(s.ID, "echo hi")
	c = w.waitChange("running", updated(s.ID, func(s berth.Session) bool { return s.Badge == berth.BadgeRunning }))
	if c.sess.CurrentTurnID == "" {
		t.Fatalf("running without a turn: %+v", c.sess)
	}
	w.waitChange("idle after the turn", updated(s.ID, func(s berth.Session) bool {
		return s.Badge == berth.BadgeIdle && s.Turns == 1
	}))

	// A permission: waiting with one pending, then idle with none.
	r := e.promptOK(s.ID, "ask delete everything", "")
	w.waitChange("waiting", updated(s.ID, func(s berth.Session) bool {
		return s.Badge == berth.BadgeWaiting && s.PendingPermissions == 1
	}))
	p := e.pendingPermission(s.ID)
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	e.waitResult(s.ID, r.TurnID)
	w.waitChange("no longer waiting", updated(s.ID, func(s berth.Session) bool {
		return s.PendingPermissions == 0 && s.Badge != berth.BadgeWaiting
	}))

	// The queue: one pending behind a busy turn, then none once it ran.
	busy := e.startBusy(s.ID, "sleep 60000")
	q := e.promptOK(s.ID, "echo queued", berth.ModeQueue)
	w.waitChange("one queued", updated(s.ID, func(s berth.Session) bool { return s.Queue.Pending == 1 }))
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	e.waitResult(s.ID, busy)
	e.waitResult(s.ID, q.EntryID)
	w.waitChange("queue drained", updated(s.ID, func(s berth.Session) bool {
		return s.Queue.Pending == 0 && s.Badge == berth.BadgeIdle && s.Turns == 4
	}))

	// Activity alone (the log growing) is published too.
	before := e.m.set.liveOf(s.ID).View().LastSeq
	e.emitActivity(s.ID)
	w.waitChange("last_seq moved", updated(s.ID, func(s berth.Session) bool { return s.LastSeq > before }))

	// Stop: stopping, then stopped; delete: the last JSON.
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	w.waitChange("stopping", updated(s.ID, func(s berth.Session) bool { return s.State == berth.StateStopping }))
	w.waitChange("stopped", updated(s.ID, func(s berth.Session) bool {
		return s.State == berth.StateStopped && s.Badge == berth.BadgeStopped && s.StopReason == berth.StopUserRequested
	}))
	if err := e.m.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	c = w.waitChange("session_deleted", func(c change) bool { return c.Type == berth.ChangeSessionDeleted })
	if c.sess.ID != s.ID || c.sess.State != berth.StateStopped || c.sess.Turns != 4 || c.sess.Name != "watched" {
		t.Fatalf("session_deleted: %+v", c.sess)
	}
	// Ids are one daemon-wide sequence: each change follows the one before.
	epoch := e.m.changes.feed.Epoch()
	for i, c := range w.all() {
		if want := fmt.Sprintf("%s-%d", epoch, i+1); c.ID != want {
			t.Fatalf("change %d has id %s, want %s", i, c.ID, want)
		}
	}
}

// emitActivity logs an event that changes nothing but the log's length.
func (e *env) emitActivity(id string) {
	e.t.Helper()
	ls := e.m.set.liveOf(id)
	ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": "test activity"})
}

func TestChangeStreamResumesWithNoGapOrDuplicate(t *testing.T) {
	e := newEnv(t)
	w := e.watch("")
	for range 3 {
		e.create(berth.CreateRequest{})
	}
	waitFor(t, "changes", func() bool { return len(w.all()) >= 6 })
	got := w.all()
	mid := got[2]
	// What a client that saw mid would get on reconnection: exactly what followed.
	r := e.watch(mid.ID)
	s := e.create(berth.CreateRequest{})
	w.waitChange("the fourth session", func(c change) bool { return c.Type == berth.ChangeSessionCreated && c.sess.ID == s.ID })
	r.waitChange("the fourth session", func(c change) bool { return c.Type == berth.ChangeSessionCreated && c.sess.ID == s.ID })
	want, resumed := w.all()[3:], r.all()
	n := min(len(want), len(resumed))
	if n < 4 {
		t.Fatalf("resumed %d changes", n)
	}
	for i := range n {
		if resumed[i].ID != want[i].ID || string(resumed[i].Data) != string(want[i].Data) {
			t.Fatalf("resumed change %d = %s %s, want %s %s", i, resumed[i].ID, resumed[i].Data, want[i].ID, want[i].Data)
		}
	}
}

func TestAStalledReaderNeitherBlocksAFloodNorMissesItSilently(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Changes = ChangeOptions{RingSize: 8, ActivityEvery: time.Millisecond} })
	s := e.create(berth.CreateRequest{})
	// Subscribed, and never read during the flood.
	stalled, err := e.m.StreamChanges(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	for range 3 {
		if res := e.prompt(s.ID, "flood 20000 16"); res.StopReason != berth.TurnEndTurn {
			t.Fatalf("flood: %+v", res)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := stalled.Next(ctx)
	var rs berth.Resync
	if err != nil || len(cs) != 1 || cs[0].Type != berth.ChangeResync ||
		json.Unmarshal(cs[0].Data, &rs) != nil || rs.Reason != berth.ResyncLagged {
		t.Fatalf("stalled reader's next = %+v, %v; want one resync (lagged)", cs, err)
	}
	// It follows on from the resync.
	if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	cs, err = stalled.Next(ctx)
	if err != nil || len(cs) == 0 || cs[0].Type != berth.ChangeSessionUpdated {
		t.Fatalf("after resync: %+v, %v", cs, err)
	}
}

func TestAFloodingAgentIsCoalesced(t *testing.T) {
	const every = 50 * time.Millisecond
	e := newEnv(t, func(o *Options) { o.Changes = ChangeOptions{ActivityEvery: every} })
	s := e.create(berth.CreateRequest{})
	w := e.watch("")
	a, b := e.watch(""), e.watch("")
	start := time.Now()
	const n = 50000
	e.prompt(s.ID, fmt.Sprintf("flood %d 16", n))
	e.log.Flush(context.Background())
	w.waitChange("the turn's end", updated(s.ID, func(s berth.Session) bool { return s.Turns == 1 }))
	elapsed := time.Since(start)
	// Per interval at most one activity update, plus the turn's own
	// changes (running, idle) and one trailing flush.
	updates := len(w.all())
	if limit := int(elapsed/every) + 4; updates > limit {
		t.Fatalf("%d events gave %d session_updated in %s; want at most %d", n, updates, elapsed, limit)
	}
	// Every reader shares the one JSON built per change.
	ca, cb := a.waitChange("a change", func(change) bool { return true }), b.waitChange("a change", func(change) bool { return true })
	if ca.ID != cb.ID || &ca.Data[0] != &cb.Data[0] {
		t.Fatalf("readers got %s and %s, or copies of the data", ca.ID, cb.ID)
	}
}

func TestARestartedDaemonAsksForResync(t *testing.T) {
	e := newEnv(t)
	w := e.watch("")
	e.create(berth.CreateRequest{})
	c := w.waitChange("a change", func(change) bool { return true })
	w.stop()
	e.close()
	e.open()
	// The new daemon's sequence passes the old id's seq: only the epoch
	// tells the old id apart.
	n := e.watch("")
	e.create(berth.CreateRequest{})
	waitFor(t, "changes in the new daemon", func() bool { return len(n.all()) >= 3 })
	r := e.watch(c.ID)
	got := r.waitChange("resync", func(change) bool { return true })
	var rs berth.Resync
	if got.Type != berth.ChangeResync || json.Unmarshal(got.Data, &rs) != nil || rs.Reason != berth.ResyncRestart {
		t.Fatalf("first change after a restart: %s %s %s", got.Type, got.ID, got.Data)
	}
	if epoch, _, err := changefeed.ParseID(got.ID); err != nil || epoch != e.m.changes.feed.Epoch() {
		t.Fatalf("resync id %s: %v", got.ID, err)
	}
}
