package session

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/berth-sh/berth"
)

// remoteCreatedWithin is how young a session another node drives must be,
// the first time this node publishes it, to be published as created (the
// lists here add it) rather than updated (the lists here refresh it if
// they show it).
const remoteCreatedWithin = time.Minute

// RemoteCommitted tells the manager that some node committed events of a
// session (a notice of the store, berth.EventWatcher). A session this node
// does not drive is then published on the all-sessions stream as the
// store has it, at the pace of local activity (at most once per
// ChangeOptions.ActivityEvery per session), so every node's stream
// carries every session's changes (docs/api.md, "All-sessions stream"). It never blocks.
func (m *Manager) RemoteCommitted(sessionID string) {
	if sessionID == "" {
		return
	}
	c := m.changes
	c.mu.Lock()
	if c.remote == nil {
		c.remote = make(map[string]struct{})
	}
	c.remote[sessionID] = struct{}{}
	c.mu.Unlock()
	select {
	case c.remoteWake <- struct{}{}:
	default:
	}
}

// publishRemoteActivity publishes the sessions other nodes wrote, as
// publishActivity does this node's: at most once per interval each. It
// has a goroutine of its own, so the store reads it makes never delay
// this node's own sessions.
func (c *changes) publishRemoteActivity(ctx context.Context) {
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-c.remoteWake:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		remote := c.remote
		c.remote = nil
		c.mu.Unlock()
		for id := range remote {
			if ctx.Err() != nil {
				return
			}
			// A session this node drives is published by its live session.
			if c.m.set.liveOf(id) == nil {
				c.publishRemote(ctx, id)
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

// publishRemote publishes a session another node drives as the store has
// it, unless that is what was last published of it here.
func (c *changes) publishRemote(ctx context.Context, id string) {
	s, err := c.m.store.GetSession(ctx, id)
	if berth.IsCode(err, berth.ENotFound) {
		c.forgetRemote(id)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			c.m.logger.Warn("another node's session not published", "session_id", id, "err", err)
		}
		return
	}
	c.m.leases.withOwners(ctx, []*berth.Session{s})
	data, err := json.Marshal(c.m.stored(s))
	if err != nil {
		return
	}
	c.mu.Lock()
	prev, seen := c.published[id]
	same := bytes.Equal(prev, data)
	typ := berth.ChangeSessionUpdated
	if !seen && s.State != berth.StateStopped && time.Since(s.CreatedAt) < remoteCreatedWithin {
		// New to this node and new altogether: created on another node, so
		// that lists here add it.
		typ = berth.ChangeSessionCreated
	}
	if !same {
		if c.published == nil {
			c.published = make(map[string][]byte)
		}
		if s.State == berth.StateStopped {
			// Nothing more is expected of it: keep nothing.
			delete(c.published, id)
		} else {
			c.published[id] = data
		}
	}
	c.mu.Unlock()
	if !same {
		c.feed.Publish(typ, data)
	}
}

// forgetRemote drops what was last published of a session.
func (c *changes) forgetRemote(id string) {
	c.mu.Lock()
	delete(c.published, id)
	c.mu.Unlock()
}
