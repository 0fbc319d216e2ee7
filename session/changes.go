package session

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
)

// DefaultActivityEvery is how often, at most, a session whose only change
// is new activity (events in its log) is published on the all-sessions
// stream.
const DefaultActivityEvery = time.Second

// ChangeOptions tune the all-sessions stream (GET /v1/events/stream).
type ChangeOptions struct {
	// RingSize is how many recent changes are kept for a reader that
	// resumes with Last-Event-ID (default changefeed.DefaultRingSize).
	RingSize int
	// ActivityEvery bounds how often one session's activity alone (its
	// last_seq moving) is published (default DefaultActivityEvery). State,
	// badge, permission and queue changes are published when they happen.
	ActivityEvery time.Duration
}

// changes publishes the manager's session changes on its feed. Changes
// a session's live session makes (state, badge, permissions, queue) are
// published by the live session, under its lock, so one session's changes are
// in the order they happened; activity, which an agent can produce at
// any rate, is only noted here and published by one goroutine at most
// once per interval per session.
type changes struct {
	m     *Manager
	feed  *changefeed.Feed
	every time.Duration

	mu sync.Mutex
	// active holds the sessions with events committed since the last flush.
	active map[string]struct{}
	// remote holds the sessions other nodes committed events of since the
	// last flush; published, what was last published of each one still
	// live; remoteWake (capacity 1) says remote is not empty (see
	// RemoteCommitted).
	remote     map[string]struct{}
	published  map[string][]byte
	remoteWake chan struct{}
	// wake (capacity 1) says active is not empty.
	wake chan struct{}

	stop func()
	done sync.WaitGroup
}

// newChanges returns the manager's change publisher.
func newChanges(o ChangeOptions) *changes {
	if o.ActivityEvery <= 0 {
		o.ActivityEvery = DefaultActivityEvery
	}
	return &changes{feed: changefeed.New(o.RingSize), every: o.ActivityEvery,
		active: make(map[string]struct{}), wake: make(chan struct{}, 1), remoteWake: make(chan struct{}, 1),
		stop: func() {}}
}

// noteActivity records that a session's log grew. It runs on the event
// log's writer goroutine: it only marks the session and never waits.
func (c *changes) noteActivity(sessionID string) {
	c.mu.Lock()
	c.active[sessionID] = struct{}{}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// startPublishing starts the goroutine that publishes activity; stopPublishing
// ends it.
func (c *changes) startPublishing() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	onCommit := c.noteActivity
	if extra := c.m.opts.OnCommit; extra != nil {
		onCommit = func(id string) {
			c.noteActivity(id)
			extra(id)
		}
	}
	c.m.log.OnCommit(onCommit)
	c.done.Add(2)
	go func() {
		defer c.done.Done()
		c.publishActivity(ctx)
	}()
	go func() {
		defer c.done.Done()
		c.publishRemoteActivity(ctx)
	}()
}

// stopPublishing ends the activity goroutine and waits for it.
func (c *changes) stopPublishing() {
	c.m.log.OnCommit(nil)
	c.stop()
	c.done.Wait()
}

// publishActivity publishes the sessions whose logs grew, then waits the
// interval before it looks again: however fast agents write, each session
// is published at most once per interval for its activity.
func (c *changes) publishActivity(ctx context.Context) {
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-c.wake:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		active := c.active
		c.active = make(map[string]struct{}, len(active))
		c.mu.Unlock()
		for id := range active {
			// A session without a live session published its last change when
			// it stopped; what it logs afterwards (nothing, normally) has
			// no live session to change.
			ls := c.m.set.liveOf(id)
			if ls == nil {
				continue
			}
			// A session busy under its lock (a store write, a full log
			// queue) is looked at next round rather than waited for, so
			// it delays no other session's activity.
			if !ls.PublishIfFree() {
				c.noteActivity(id)
			}
		}
		pace.Reset(c.every)
		select {
		case <-pace.C:
		case <-ctx.Done():
			return
		}
	}
}

// publishStored publishes a session that has no live session (deleted, or a
// stored change of a stopped session).
func (c *changes) publishStored(typ string, s *berth.Session) {
	data, err := json.Marshal(s)
	if err != nil {
		c.m.logger.Error("session not published", "session_id", s.ID, "err", err)
		return
	}
	c.feed.Publish(typ, data)
}

// StreamChanges implements berth.SessionService.
func (m *Manager) StreamChanges(ctx context.Context, lastEventID string) (berth.ChangeStream, error) {
	return m.changes.feed.Subscribe(lastEventID)
}
