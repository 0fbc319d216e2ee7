package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
)

// openBench opens an empty store in the benchmark's temporary directory.
func openBench(b *testing.B) berth.Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendEvents: see storetest.BenchAppendEvents.
func BenchmarkAppendEvents(b *testing.B) { storetest.BenchAppendEvents(b, openBench) }

// BenchmarkListEvents: see storetest.BenchListEvents, on 200,000 events.
func BenchmarkListEvents(b *testing.B) { storetest.BenchListEvents(b, openBench, 200_000) }

// BenchmarkCountSessions: see storetest.BenchCountSessions.
func BenchmarkCountSessions(b *testing.B) { storetest.BenchCountSessions(b, openBench) }

// BenchmarkUpdateSession: see storetest.BenchUpdateSession.
func BenchmarkUpdateSession(b *testing.B) { storetest.BenchUpdateSession(b, openBench) }
