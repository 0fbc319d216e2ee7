package hooks

import (
	"context"
	"encoding/json"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/syncx"
)

// badgeRetry is the pause before the badge watcher subscribes again after
// its stream failed.
const badgeRetry = time.Second

// watchBadges follows every session's badge on the change stream and
// enqueues a "badge:<badge>" delivery for each hook that wants the new
// one. The last badge of every session is kept with its cursor, so a
// change that happened while no daemon ran is found at the next start.
func (s *Service) watchBadges(ctx context.Context) {
	last := map[string]berth.Badge{}
	for ctx.Err() == nil {
		stream, err := s.sess.StreamChanges(ctx, "")
		if err != nil {
			s.log.Warn("hooks: following session changes failed", "err", err)
			if !syncx.Sleep(ctx, badgeRetry) {
				return
			}
			continue
		}
		// Subscribed first, listed second: no change falls between.
		s.reconcileBadges(ctx, last)
		s.followBadges(ctx, stream, last)
		stream.Close()
	}
}

// followBadges reads the stream until it fails or ctx ends.
func (s *Service) followBadges(ctx context.Context, stream berth.ChangeStream, last map[string]berth.Badge) {
	for {
		changes, err := stream.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("hooks: session change stream ended", "err", err)
				syncx.Sleep(ctx, badgeRetry)
			}
			return
		}
		for _, ch := range changes {
			switch ch.Type {
			case berth.ChangeResync:
				s.reconcileBadges(ctx, last)
			case berth.ChangeSessionDeleted:
				var ses berth.Session
				if json.Unmarshal(ch.Data, &ses) == nil {
					delete(last, ses.ID)
				}
			case berth.ChangeSessionCreated, berth.ChangeSessionUpdated:
				var ses berth.Session
				if err := json.Unmarshal(ch.Data, &ses); err != nil {
					s.log.Warn("hooks: a session change does not decode", "err", err)
					continue
				}
				s.badgeSeen(ctx, &ses, last)
			}
		}
	}
}

// reconcileBadges looks at every session's badge as it is now.
func (s *Service) reconcileBadges(ctx context.Context, last map[string]berth.Badge) {
	f := berth.SessionFilter{Limit: 1000}
	for ctx.Err() == nil {
		page, err := s.sess.ListSessions(ctx, f)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("hooks: listing sessions failed", "err", err)
			}
			return
		}
		for _, ses := range page.Sessions {
			s.badgeSeen(ctx, ses, last)
		}
		if page.NextCursor == "" || page.NextCursor == f.Cursor {
			return
		}
		f.Cursor = page.NextCursor
	}
}

// badgeSeen records a session's badge and, when it changed, enqueues the
// deliveries of the hooks that want the new one.
func (s *Service) badgeSeen(ctx context.Context, ses *berth.Session, last map[string]berth.Badge) {
	prev, ok := last[ses.ID]
	if !ok {
		c, found, err := s.store.GetHookCursor(ctx, ses.ID)
		if err != nil {
			s.log.Warn("hooks: reading a hook cursor failed", "session_id", ses.ID, "err", err)
			return
		}
		if found {
			prev = c.Badge
		}
	}
	if prev == ses.Badge || ses.Badge == "" {
		last[ses.ID] = prev
		return
	}
	var ds []*berth.HookDelivery
	if prev != berth.BadgeUnknown {
		name := "badge:" + string(ses.Badge)
		for _, h := range s.hooks {
			if !h.wants(name, ses) {
				continue
			}
			data, _ := json.Marshal(map[string]string{"badge": string(ses.Badge), "previous": string(prev)})
			now := s.o.Now().UTC()
			body, err := json.Marshal(payload{Event: berth.Event{Seq: ses.LastSeq, SessionID: ses.ID,
				TurnID: ses.CurrentTurnID, Type: name, Time: now, Data: data}, Session: ses})
			if err != nil {
				s.log.Error("hooks: encoding a badge change failed", "session_id", ses.ID, "err", err)
				return
			}
			ds = append(ds, &berth.HookDelivery{ID: ids.New("dlv"), Hook: h.Name, HookIndex: h.Index, Event: name,
				SessionID: ses.ID, Seq: ses.LastSeq, CreatedAt: now, Body: body})
		}
	}
	if err := s.store.EnqueueHookDeliveries(ctx, ses.ID, berth.HookCursor{Badge: ses.Badge}, ds); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("hooks: recording a badge change failed", "session_id", ses.ID, "err", err)
		}
		// Not recorded: the next change or start looks again.
		delete(last, ses.ID)
		return
	}
	last[ses.ID] = ses.Badge
	if len(ds) > 0 {
		s.enqueued.Add(int64(len(ds)))
		s.wakeAll()
	}
}
