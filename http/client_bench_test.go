package http

import (
	"context"
	"testing"

	"github.com/berth-sh/berth"
)

// BenchmarkClientStream reads a stopped session's log of 10,000 events
// through the Go client's event stream, to its end (BENCHMARKS.md: the
// client's cost per event).
func BenchmarkClientStream(b *testing.B) {
	f := newFakeService()
	f.appendEvents("ses_1", 10000, berth.EventAgentMessage)
	f.stop("ses_1")
	s, done := serveTCP(b, f, ServerOptions{Token: testToken})
	defer func() { s.Close(context.Background()); <-done }()
	c := tcpClient(s.Addr(), testToken)
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range c.Events(context.Background(), "ses_1", 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10000 {
			b.Fatalf("%d events", n)
		}
	}
}
