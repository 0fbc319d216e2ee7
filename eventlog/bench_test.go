package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// benchEvent is a typical streamed agent chunk (~80 bytes of JSON).
func benchEvent(session string) berth.Event {
	return berth.Event{SessionID: session, TurnID: "01JTURNAAAAAAAAAAAAAAAAAAA", Type: berth.EventAgentMessage,
		Time: time.Now(), Data: json.RawMessage(`{"content":{"type":"text","text":"Hello there, streaming a chunk."}}`)}
}

// BenchmarkIngest measures events/s through Append and Flush into a
// SQLite store: producers enqueue b.N events in total, then one Flush
// waits for the last commit.
func BenchmarkIngest(b *testing.B) {
	cases := []struct {
		producers, sessions, perCall int
	}{
		{1, 1, 1},    // one agent, one event per Append
		{8, 10, 1},   // eight agents streaming at once
		{64, 64, 1},  // many sessions, one producer each
		{8, 10, 100}, // producers that append in chunks
		{1, 1, 1000}, // bulk import
	}
	for _, c := range cases {
		name := fmt.Sprintf("producers=%d/sessions=%d/per-call=%d", c.producers, c.sessions, c.perCall)
		b.Run(name, func(b *testing.B) {
			sessions := make([]string, c.sessions)
			for i := range sessions {
				sessions[i] = fmt.Sprintf("01JD5Z8W3N7Q2XK4M6R9T%05d", i)
			}
			store := newStore(b, sessions...)
			l := openLog(b, store, Options{})
			ctx := context.Background()
			b.ResetTimer()
			var wg sync.WaitGroup
			for p := range c.producers {
				n := b.N / c.producers
				if p == 0 {
					n += b.N % c.producers
				}
				wg.Go(func() {
					buf := make([]berth.Event, 0, c.perCall)
					for i := range n {
						buf = append(buf, benchEvent(sessions[(p+i)%len(sessions)]))
						if len(buf) == c.perCall || i == n-1 {
							if err := l.Append(ctx, buf...); err != nil {
								b.Error(err)
								return
							}
							buf = buf[:0]
						}
					}
				})
			}
			wg.Wait()
			if err := l.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendSync measures the latency of one event appended and
// committed alone (no other load).
func BenchmarkAppendSync(b *testing.B) {
	store := newStore(b, "a")
	l := openLog(b, store, Options{})
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := l.AppendSync(ctx, benchEvent("a")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamLive measures how fast a live reader follows a producer:
// events/s delivered through the ring.
func BenchmarkStreamLive(b *testing.B) {
	store := newStore(b, "a")
	l := openLog(b, store, Options{})
	ctx := context.Background()
	st, err := l.Stream(ctx, "a", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for range b.N {
			if err := l.Append(ctx, benchEvent("a")); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for n := 0; n < b.N; {
		evs, err := st.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(evs)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
