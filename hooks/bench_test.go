package hooks

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// benchDeliver delivers b.N turn_ended events spread over sessions to a
// local receiver that answers 200 at once, and reports deliveries per
// second end to end (scan, enqueue, claim, POST, record).
func benchDeliver(b *testing.B, sessions int) {
	e := newEnv(b)
	rc := newReceiver(b, nil)
	opts := testOptions()
	opts.PollInterval = time.Second
	e.start(opts, Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}})
	for i := range sessions {
		e.session(fmt.Sprintf("ses_%03d", i), "demo", nil)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		e.emit(fmt.Sprintf("ses_%03d", i%sessions), berth.EventTurnEnded)
	}
	for e.svc.Counters().Delivered < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}

func BenchmarkDeliverOneSession(b *testing.B)    { benchDeliver(b, 1) }
func BenchmarkDeliverFiftySessions(b *testing.B) { benchDeliver(b, 50) }

// BenchmarkScanFlood is the hooks' cost on a flooding session: b.N
// agent_message events committed in batches of 256 (as the event log
// does), each batch told to the service as its commit callback does, then
// one turn_ended; with a hook that wants turn_ended it ends when that one
// is enqueued. "none" is the same without hooks: the difference is what
// the hooks cost.
func BenchmarkScanFlood(b *testing.B) {
	for _, withHook := range []bool{false, true} {
		name := "none"
		if withHook {
			name = "turn_ended"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			var hooks []Hook
			if withHook {
				hooks = append(hooks, Hook{URL: "http://127.0.0.1:1/", Events: []string{berth.EventTurnEnded}})
			}
			e.start(testOptions(), hooks...)
			e.session("ses_a", "demo", nil)
			types := make([]string, 256)
			for i := range types {
				types[i] = berth.EventAgentMessage
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += 256 {
				e.emit("ses_a", types[:min(256, b.N-done)]...)
			}
			e.emit("ses_a", berth.EventTurnEnded)
			for withHook && e.svc.Counters().Enqueued < 1 {
				time.Sleep(time.Millisecond)
			}
		})
	}
}
