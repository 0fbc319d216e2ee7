package http

import (
	"sync/atomic"
	"testing"
)

// A short read is counted in and out through ServerOptions.Reading (a
// booting daemon lets it through first); a write, a stream and a wait
// for a turn are not.
func TestShortReadsAreCounted(t *testing.T) {
	var started, inFlight atomic.Int64
	h := NewServer(newFakeService(), ServerOptions{Reading: func() func() {
		started.Add(1)
		inFlight.Add(1)
		return func() { inFlight.Add(-1) }
	}}).Handler()
	for _, c := range []struct {
		method, path string
		counted      bool
	}{
		{"GET", "/v1/health", true},
		{"GET", "/v1/sessions", true},
		{"GET", "/v1/sessions/ses_1", true},
		{"GET", "/v1/sessions/ses_1/checkpoints", true},
		{"POST", "/v1/sessions/ses_1/rewind", false},
	} {
		before := started.Load()
		call(t, h, c.method, c.path, `{"checkpoint_id":"ckpt_1"}`)
		if got := started.Load() - before; got != map[bool]int64{true: 1, false: 0}[c.counted] {
			t.Errorf("%s %s counted %d times", c.method, c.path, got)
		}
		if n := inFlight.Load(); n != 0 {
			t.Fatalf("%s %s left %d reads in flight", c.method, c.path, n)
		}
	}
	for pattern, short := range map[string]bool{
		"GET /v1/sessions/{id}/events":        true,
		"GET /v1/sessions/{id}/events/stream": false,
		"GET /v1/events/stream":               false,
		"GET /v1/sessions/{id}/turns/{turn}":  false,
		"POST /v1/sessions":                   false,
		"GET /metrics":                        true,
	} {
		if shortRead(pattern) != short {
			t.Errorf("shortRead(%q) = %v", pattern, !short)
		}
	}
}
