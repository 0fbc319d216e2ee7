package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// The benchmarks every backend runs, so that their figures compare line by
// line (BENCHMARKS.md).

// BenchOpener opens an empty store for a benchmark, closed when it ends.
type BenchOpener func(b *testing.B) berth.Store

// BenchID is a session id as long as the daemon's (a 26-character ULID).
func BenchID(i int) string { return fmt.Sprintf("01JD5Z8W3N7Q2XK4M6R9T%05d", i) }

// SmallEvent is a typical streamed agent chunk (~80 bytes of JSON).
func SmallEvent(session string, seq int64) berth.Event {
	return berth.Event{Seq: seq, SessionID: session, TurnID: "01JTURNAAAAAAAAAAAAAAAAAAA", Type: berth.EventAgentMessage,
		Time: time.Now(), Data: json.RawMessage(`{"content":{"type":"text","text":"Hello there, streaming a chunk."}}`)}
}

// AddBenchSessions creates the active sessions BenchID(0)…BenchID(n-1).
func AddBenchSessions(b *testing.B, s berth.Store, n int) {
	b.Helper()
	for i := range n {
		sess := &berth.Session{ID: BenchID(i), Agent: "a", State: berth.StateActive, CreatedAt: time.Now()}
		if err := s.CreateSession(context.Background(), sess); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchAppendEvents writes batches of 1000 small events in one
// transaction each, spread over a few sessions, and reports events/s.
func BenchAppendEvents(b *testing.B, open BenchOpener) {
	for _, sessions := range []int{1, 10} {
		b.Run(fmt.Sprintf("batch=1000/sessions=%d", sessions), func(b *testing.B) {
			s := open(b)
			AddBenchSessions(b, s, sessions)
			const batch = 1000
			next := make([]int64, sessions)
			evs := make([]berth.Event, batch)
			for i := range evs {
				evs[i] = SmallEvent(BenchID(i%sessions), 0)
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

// BenchListEvents reads pages from the middle of a log of total events
// and one rare type from its middle, and reports the latency of one page.
func BenchListEvents(b *testing.B, open BenchOpener, total int64) {
	s := open(b)
	AddBenchSessions(b, s, 1)
	evs := make([]berth.Event, 1000)
	for seq := int64(1); seq <= total; seq += int64(len(evs)) {
		for i := range evs {
			evs[i] = SmallEvent(BenchID(0), seq+int64(i))
		}
		if err := s.AppendEvents(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	for _, limit := range []int{100, 1000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			for i := range b.N {
				after := int64(i*7919) % (total - int64(limit))
				page, err := s.ListEvents(context.Background(), BenchID(0), berth.EventFilter{After: after, Limit: limit})
				if err != nil || len(page) != limit {
					b.Fatalf("page: %d events, %v", len(page), err)
				}
			}
		})
	}
	b.Run("type-filter", func(b *testing.B) {
		for range b.N {
			if _, err := s.ListEvents(context.Background(), BenchID(0), berth.EventFilter{After: total / 2, Type: berth.EventToolCall}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchListSessions pages through 10,000 sessions, 100 a page, newest
// first, and reports the latency of one page.
func BenchListSessions(b *testing.B, open BenchOpener) {
	s := open(b)
	AddBenchSessions(b, s, 10_000)
	b.ResetTimer()
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

// benchDocs creates n active sessions of some 4 KiB documents each (an
// agent offering 20 commands), a third of them waiting for a permission,
// and returns their ids.
func benchDocs(b *testing.B, s berth.Store, n int) []string {
	b.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		sess := newSession(BenchID(i), base.Add(time.Duration(i)*time.Millisecond))
		sess.State, sess.PendingPermissions = berth.StateActive, i%3
		for j := range 20 {
			sess.ACP.Commands = append(sess.ACP.Commands, berth.ACPCommand{Name: fmt.Sprintf("command-%d", j),
				Description: fmt.Sprintf("What command %d does, said in a sentence or two of the agent's own words, to the user.", j)})
		}
		if err := s.CreateSession(context.Background(), sess); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sess.ID)
	}
	return ids
}

// BenchCountSessions counts 1,000 active sessions (benchDocs) as a
// census does while a booting daemon has not reattached them: "list"
// reads them whole, a page of 1,000, as the census did; "count" is the
// store's berth.SessionCounter with none of them live here, "count-live"
// with the 1,000 live (excluded by id). It reports the latency of one.
func BenchCountSessions(b *testing.B, open BenchOpener) {
	s := open(b)
	live := benchDocs(b, s, 1000)
	b.Run("list", func(b *testing.B) {
		for range b.N {
			page, err := s.ListSessions(context.Background(), berth.SessionFilter{State: berth.StateActive, Limit: 1000})
			if err != nil || len(page.Sessions) != 1000 {
				b.Fatalf("list: %d sessions, %v", len(page.Sessions), err)
			}
		}
	})
	for _, c := range []struct {
		name    string
		exclude []string
		groups  int
	}{{"count", nil, 2}, {"count-live", live, 0}} {
		b.Run(c.name, func(b *testing.B) {
			counter, ok := s.(berth.SessionCounter)
			if !ok {
				b.Skip("the store does not count sessions")
			}
			for range b.N {
				counts, err := counter.CountSessions(context.Background(), c.exclude)
				if err != nil || len(counts) != c.groups {
					b.Fatalf("count: %v, %v", counts, err)
				}
			}
		})
	}
}

// BenchUpdateSession writes a session of some 4 KiB (benchDocs) again
// and again, its pending permissions changing, as a turn's writes do, and
// reports the latency of one write.
func BenchUpdateSession(b *testing.B, open BenchOpener) {
	s := open(b)
	benchDocs(b, s, 1000)
	sess, err := s.GetSession(context.Background(), BenchID(500))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		sess.PendingPermissions = i % 3
		if err := s.UpdateSession(context.Background(), sess, ""); err != nil {
			b.Fatal(err)
		}
	}
}
