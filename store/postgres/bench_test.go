package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/jackc/pgx/v5"
)

// benchStore opens a store on a fresh database with sessions s0…s(n-1).
func benchStore(b *testing.B, sessions int) *Store {
	b.Helper()
	s := openAt(b, b.TempDir())
	b.Cleanup(func() { s.Close() })
	for i := range sessions {
		sess := &berth.Session{ID: benchID(i), Agent: "a", State: berth.StateActive, CreatedAt: time.Now()}
		if err := s.CreateSession(context.Background(), sess); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// benchID is a session id as long as the daemon's (a 26-character ULID).
func benchID(i int) string { return fmt.Sprintf("01JD5Z8W3N7Q2XK4M6R9T%05d", i) }

// smallEvent is a typical streamed agent chunk (~80 bytes of JSON).
func smallEvent(session string, seq int64) berth.Event {
	return berth.Event{Seq: seq, SessionID: session, TurnID: "01JTURNAAAAAAAAAAAAAAAAAAA", Type: berth.EventAgentMessage,
		Time: time.Now(), Data: json.RawMessage(`{"content":{"type":"text","text":"Hello there, streaming a chunk."}}`)}
}

// BenchmarkAppendEvents writes batches of 1000 small events in one
// transaction each, spread over a few sessions, and reports events/s.
func BenchmarkAppendEvents(b *testing.B) {
	for _, sessions := range []int{1, 10} {
		b.Run(fmt.Sprintf("batch=1000/sessions=%d", sessions), func(b *testing.B) {
			s := benchStore(b, sessions)
			const batch = 1000
			next := make([]int64, sessions)
			evs := make([]berth.Event, batch)
			for i := range evs {
				evs[i] = smallEvent(benchID(i%sessions), 0)
			}
			b.ResetTimer()
			for range b.N {
				for i := range evs {
					k := i % sessions
					next[k]++
					evs[i].Seq = next[k]
				}
				if err := s.AppendEvents(context.Background(), evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkListEvents reads pages from the middle of a 100,000-event log
// and reports the latency of one page.
func BenchmarkListEvents(b *testing.B) {
	s := benchStore(b, 1)
	const total = 100_000
	evs := make([]berth.Event, 1000)
	for seq := int64(1); seq <= total; seq += int64(len(evs)) {
		for i := range evs {
			evs[i] = smallEvent(benchID(0), seq+int64(i))
		}
		if err := s.AppendEvents(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	for _, limit := range []int{100, 1000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			for i := range b.N {
				after := int64(i*7919) % (total - int64(limit))
				page, err := s.ListEvents(context.Background(), benchID(0), berth.EventFilter{After: after, Limit: limit})
				if err != nil || len(page) != limit {
					b.Fatalf("page: %d events, %v", len(page), err)
				}
			}
		})
	}
}

// BenchmarkPageEndOfMillion reads the last page of 1000 events of a
// 1,000,000-event log, as `berth bench --page-log` does over HTTP.
func BenchmarkPageEndOfMillion(b *testing.B) {
	s := benchStore(b, 1)
	const total, batch = 1_000_000, 20_000
	now := time.Now()
	data := json.RawMessage(`{"text":"a benchmark chunk of text"}`)
	evs := make([]berth.Event, batch)
	for first := int64(1); first <= total; first += batch {
		for i := range evs {
			evs[i] = berth.Event{Seq: first + int64(i), SessionID: benchID(0), TurnID: "turn_bench",
				Type: berth.EventAgentMessage, Time: now, Data: data}
		}
		if err := s.AppendEvents(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		page, err := s.ListEvents(context.Background(), benchID(0), berth.EventFilter{After: total - 1000, Limit: 1000})
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
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				at := base.Add(time.Duration(i) * time.Microsecond)
				sess := &berth.Session{ID: benchID(i), Name: "bench-" + strconv.Itoa(i), Agent: "demo",
					State: berth.StateStopped, StopReason: berth.StopUserRequested, Workspace: "/tmp/berth-bench-1922428648",
					Labels: map[string]string{"bench": "list"}, CreatedAt: at, UpdatedAt: at, LastActivityAt: at}
				if err := s.CreateSession(ctx, sess); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
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
