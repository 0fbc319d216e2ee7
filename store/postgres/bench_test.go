package postgres

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// openBench opens an empty store on a fresh database.
func openBench(b *testing.B) berth.Store {
	b.Helper()
	s := openAt(b, b.TempDir())
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendEvents: see storetest.BenchAppendEvents.
func BenchmarkAppendEvents(b *testing.B) { storetest.BenchAppendEvents(b, openBench) }

// BenchmarkListEvents: see storetest.BenchListEvents, on 100,000 events.
func BenchmarkListEvents(b *testing.B) { storetest.BenchListEvents(b, openBench, 100_000) }

// BenchmarkPageEndOfMillion reads the last page of 1000 events of a
// 1,000,000-event log, as `berth bench --page-log` does over HTTP.
func BenchmarkPageEndOfMillion(b *testing.B) {
	s := openBench(b)
	storetest.AddBenchSessions(b, s, 1)
	const total, batch = 1_000_000, 20_000
	now := time.Now()
	data := json.RawMessage(`{"text":"a benchmark chunk of text"}`)
	evs := make([]berth.Event, batch)
	for first := int64(1); first <= total; first += batch {
		for i := range evs {
			evs[i] = berth.Event{Seq: first + int64(i), SessionID: storetest.BenchID(0), TurnID: "turn_bench",
				Type: berth.EventAgentMessage, Time: now, Data: data}
		}
		if err := s.AppendEvents(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		page, err := s.ListEvents(context.Background(), storetest.BenchID(0), berth.EventFilter{After: total - 1000, Limit: 1000})
		if err != nil || len(page) != 1000 || page[999].Seq != total {
			b.Fatalf("page: %d events, %v", len(page), err)
		}
	}
}

// BenchmarkListSessionsByLabel walks 10,000 sessions that share a label,
// 100 a page, as `berth bench --list-sessions` does over HTTP, and reports
// the time of one page. Autovacuum is off for the sessions tables, so
// "unanalyzed" is the planner without statistics, as right after a burst of
// creates; "analyzed" follows an ANALYZE.
func BenchmarkListSessionsByLabel(b *testing.B) {
	s := openAt(b, b.TempDir())
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, t := range []string{"sessions", "session_labels"} {
		if err := s.pool.with(ctx, func(c *pgx.Conn) error {
			_, err := c.Exec(ctx, `ALTER TABLE `+t+` SET (autovacuum_enabled = false)`)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	const n, workers = 10_000, 8
	base := time.Now().UTC()
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			for i := w; i < n; i += workers {
				at := base.Add(time.Duration(i) * time.Microsecond)
				sess := &berth.Session{ID: storetest.BenchID(i), Name: "bench-" + strconv.Itoa(i), Agent: "demo",
					State: berth.StateStopped, StopReason: berth.StopUserRequested, Workspace: "/tmp/berth-bench-1922428648",
					Labels: map[string]string{"bench": "list"}, CreatedAt: at, UpdatedAt: at, LastActivityAt: at}
				if err := s.CreateSession(ctx, sess); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	walk := func(b *testing.B) {
		pages := 0
		for b.Loop() {
			cursor, seen := "", 0
			for {
				page, err := s.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"bench": "list"},
					Cursor: cursor, Limit: 100})
				if err != nil {
					b.Fatal(err)
				}
				pages++
				seen += len(page.Sessions)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if seen != n {
				b.Fatalf("walked %d sessions", seen)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages)/1e6, "ms/page")
	}
	b.Run("unanalyzed", walk)
	if err := s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `ANALYZE sessions, session_labels`)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Run("analyzed", walk)
}

// BenchmarkAppendOne commits one small event per transaction, as the event
// log writer does for a lone streaming session: the cost a commit pays for
// its notice (WatchEvents) and, fenced, for the lease check (Fence).
func BenchmarkAppendOne(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run("fenced="+strconv.FormatBool(fenced), func(b *testing.B) {
			s := openBench(b)
			storetest.AddBenchSessions(b, s, 1)
			id := storetest.BenchID(0)
			if f, ok := s.(berth.Fencer); fenced && ok {
				f.Fence("n1")
				if _, err := s.AcquireLease(context.Background(), id, "n1", time.Now(), time.Hour); err != nil {
					b.Fatal(err)
				}
			} else if fenced {
				b.Skip("not a Fencer")
			}
			seq := int64(0)
			for b.Loop() {
				seq++
				if err := s.AppendEvents(context.Background(), []berth.Event{storetest.SmallEvent(id, seq)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCountSessions: see storetest.BenchCountSessions.
func BenchmarkCountSessions(b *testing.B) { storetest.BenchCountSessions(b, openBench) }

// BenchmarkUpdateSession: see storetest.BenchUpdateSession.
func BenchmarkUpdateSession(b *testing.B) { storetest.BenchUpdateSession(b, openBench) }
