package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/ids"
)

// readResult holds the read-path figures of bench.
type readResult struct {
	PageLogEvents   int64   `json:"page_log_events"`
	PageP50Ms       float64 `json:"page_1000_of_log_p50_ms"`
	PageP99Ms       float64 `json:"page_1000_of_log_p99_ms"`
	ListedSessions  int     `json:"listed_sessions"`
	ListPageP50Ms   float64 `json:"list_page_p50_ms"`
	ListPageP99Ms   float64 `json:"list_page_p99_ms"`
	ListPageSize    int     `json:"list_page_size"`
	ListPagesWalked int     `json:"list_pages"`
}

// benchPaging fills one session's log with n events through the event log
// (the write path the agents use, without an agent in front), then times
// GET …/events?after=n-1000&limit=1000 over HTTP and checks each page.
func benchPaging(ctx context.Context, c *bclient.Client, d *daemon.Daemon, n int64, res *readResult) error {
	now := time.Now().UTC()
	s := &berth.Session{ID: ids.New("ses"), Name: "bench-page-log", Agent: "demo", State: berth.StateStopped,
		StopReason: berth.StopUserRequested, Workspace: d.Home(), Labels: map[string]string{},
		CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
	if err := d.Store().CreateSession(ctx, s); err != nil {
		return err
	}
	batch := make([]berth.Event, 0, 1000)
	data := []byte(`{"text":"a benchmark chunk of text"}`)
	for i := int64(0); i < n; i++ {
		batch = append(batch, berth.Event{SessionID: s.ID, TurnID: "turn_bench", Type: berth.EventAgentMessage, Time: now, Data: data})
		if len(batch) == cap(batch) || i == n-1 {
			if err := d.Log().Append(ctx, batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := d.Log().Flush(ctx); err != nil {
		return err
	}
	res.PageLogEvents = n
	var lat []time.Duration
	for range 50 {
		t0 := time.Now()
		evs, err := c.ListEvents(ctx, s.ID, berth.EventFilter{After: n - 1000, Limit: 1000})
		lat = append(lat, time.Since(t0))
		if err != nil {
			return err
		}
		if len(evs) != 1000 || evs[0].Seq != n-999 || evs[999].Seq != n {
			return fmt.Errorf("page after %d has %d events from seq %d", n-1000, len(evs), evs[0].Seq)
		}
	}
	res.PageP50Ms, res.PageP99Ms = pct(lat, 50), pct(lat, 99)
	return nil
}

// benchListing stores n stopped sessions, then walks GET /v1/sessions one
// page of pageSize at a time and times each page.
func benchListing(ctx context.Context, c *bclient.Client, d *daemon.Daemon, n, pageSize int, res *readResult) error {
	base := time.Now().UTC()
	for i := range n {
		at := base.Add(time.Duration(i) * time.Microsecond)
		s := &berth.Session{ID: ids.New("ses"), Name: "bench-" + strconv.Itoa(i), Agent: "demo", State: berth.StateStopped,
			StopReason: berth.StopUserRequested, Workspace: d.Home(), Labels: map[string]string{"bench": "list"},
			CreatedAt: at, UpdatedAt: at, LastActivityAt: at}
		if err := d.Store().CreateSession(ctx, s); err != nil {
			return err
		}
	}
	var lat []time.Duration
	cursor, seen := "", 0
	for {
		q := url.Values{"limit": {strconv.Itoa(pageSize)}, "label": {"bench=list"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page berth.SessionPage
		t0 := time.Now()
		err := c.Do(ctx, "GET", "/v1/sessions", q, nil, &page)
		lat = append(lat, time.Since(t0))
		if err != nil {
			return err
		}
		seen += len(page.Sessions)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if seen != n {
		return fmt.Errorf("listing walked %d sessions, want %d", seen, n)
	}
	res.ListedSessions, res.ListPageSize, res.ListPagesWalked = n, pageSize, len(lat)
	res.ListPageP50Ms, res.ListPageP99Ms = pct(lat, 50), pct(lat, 99)
	return nil
}
