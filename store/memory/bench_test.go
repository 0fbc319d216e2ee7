package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// The benchmarks are those of store/sqlite, so the two compare line by
// line (BENCHMARKS.md).

// benchStore opens a store with sessions s0…s(n-1).
func benchStore(b *testing.B, sessions int) *Store {
	b.Helper()
	s := New()
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
			ids := make([]string, sessions)
			for k := range ids {
				ids[k] = benchID(k)
			}
			evs := make([]berth.Event, batch)
			for i := range evs {
				evs[i] = smallEvent(ids[i%sessions], 0)
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

// BenchmarkListEvents reads pages from the middle of a 200,000-event log,
// and reports the latency of one page.
func BenchmarkListEvents(b *testing.B) {
	s := benchStore(b, 1)
	const total = 200_000
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
	b.Run("type-filter", func(b *testing.B) {
		for range b.N {
			if _, err := s.ListEvents(context.Background(), benchID(0), berth.EventFilter{After: total / 2, Type: berth.EventToolCall}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkListSessions pages through 10,000 sessions, 100 a page, newest
// first, and reports the latency of one page.
func BenchmarkListSessions(b *testing.B) {
	s := benchStore(b, 10_000)
	cursor := ""
	for range b.N {
		page, err := s.ListSessions(context.Background(), berth.SessionFilter{Limit: 100, Cursor: cursor})
		if err != nil || len(page.Sessions) != 100 {
			b.Fatalf("page: %d sessions, %v", len(page.Sessions), err)
		}
		// After the last page, the first again.
		cursor = page.NextCursor
	}
}
