package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/syncx"
	"github.com/jackc/pgx/v5"
)

var _ berth.EventWatcher = (*Store)(nil)

// eventsChannel is the NOTIFY channel AppendEvents announces commits on;
// each payload is "<session id> <last seq>".
const eventsChannel = "berth_events"

// notifySQL announces, in AppendEvents' transaction, the last seq of each
// session of the batch ($1, payloads in session order). PostgreSQL sends
// the notices at commit, in commit order, and never for a rolled back
// transaction.
const notifySQL = `SELECT pg_notify('` + eventsChannel + `', p) FROM unnest($1::text[]) AS p`

// Reconnection backoff of WatchEvents.
const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// defaultWatchIdle is how long the watcher's connection may stay silent
// before WatchEvents pings it: a connection the network dropped without a
// word (a partition, a host gone) says nothing, and would otherwise be
// waited on until TCP keepalive gives up, minutes later.
const defaultWatchIdle = 15 * time.Second

// WatchEvents calls fn(sessionID, lastSeq) for every commit of events by
// any store on this database (this one included), in commit order, until
// ctx ends; it returns ctx's error. It holds a connection of its own,
// outside the pool, that LISTENs on berth_events. When that connection is
// lost it reconnects, with a backoff from 50 ms to 5 s, and once it
// listens again calls fn("", 0): notices may have been missed, so every
// reader should read the store again. A connection silent for 15 s is
// pinged, and one that does not answer within 5 s is taken for lost. fn
// runs on WatchEvents' goroutine: it must not block for long.
func (s *Store) WatchEvents(ctx context.Context, fn func(sessionID string, lastSeq int64)) error {
	backoff := watchBackoffMin
	for reconnect := false; ; reconnect = true {
		listening, err := s.listen(ctx, fn, reconnect)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listening {
			// It worked for a while: start the backoff again.
			backoff = watchBackoffMin
		}
		s.logger.Warn("postgres store: event watcher lost its connection, reconnecting", "err", err, "in", backoff)
		if !syncx.Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// listen connects, LISTENs and passes every notice to fn until the
// connection fails or ctx ends; after a reconnect it first calls fn("", 0).
// listening reports whether it got as far as listening.
func (s *Store) listen(ctx context.Context, fn func(string, int64), reconnect bool) (listening bool, err error) {
	c, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return false, err
	}
	defer func() {
		// Closing sends a Terminate; bound it, as ctx may be over.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		c.Close(cctx)
	}()
	if _, err := c.Exec(ctx, `LISTEN `+eventsChannel); err != nil {
		return false, err
	}
	if reconnect {
		fn("", 0)
	}
	idle := s.watchIdle
	if idle <= 0 {
		idle = defaultWatchIdle
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, idle)
		n, err := c.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Silence: make sure the server is still there. A timed-out
			// wait leaves the connection usable.
			pctx, cancel := context.WithTimeout(ctx, min(idle, 5*time.Second))
			err = c.Ping(pctx)
			cancel()
			if err != nil {
				return true, err
			}
			continue
		}
		if err != nil {
			return true, err
		}
		id, last, ok := parseNotice(n.Payload)
		if !ok {
			s.logger.Warn("postgres store: malformed event notice", "payload", n.Payload)
			continue
		}
		fn(id, last)
	}
}

// notice is the payload of a commit of a session's events up to last.
func notice(id string, last int64) string { return id + " " + strconv.FormatInt(last, 10) }

// parseNotice reads a payload notice made.
func parseNotice(p string) (string, int64, bool) {
	i := strings.LastIndexByte(p, ' ')
	if i <= 0 {
		return "", 0, false
	}
	last, err := strconv.ParseInt(p[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return p[:i], last, true
}
