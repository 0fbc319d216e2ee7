package memory

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
)

// The benchmarks are those of store/sqlite (package storetest), so the two
// compare line by line (BENCHMARKS.md).

// openBench opens an empty store.
func openBench(*testing.B) berth.Store { return New() }

// BenchmarkAppendEvents: see storetest.BenchAppendEvents.
func BenchmarkAppendEvents(b *testing.B) { storetest.BenchAppendEvents(b, openBench) }

// BenchmarkListEvents: see storetest.BenchListEvents, on 200,000 events.
func BenchmarkListEvents(b *testing.B) { storetest.BenchListEvents(b, openBench, 200_000) }

// BenchmarkListSessions: see storetest.BenchListSessions.
func BenchmarkListSessions(b *testing.B) { storetest.BenchListSessions(b, openBench) }

// BenchmarkCountSessions: see storetest.BenchCountSessions.
func BenchmarkCountSessions(b *testing.B) { storetest.BenchCountSessions(b, openBench) }

// BenchmarkUpdateSession: see storetest.BenchUpdateSession.
func BenchmarkUpdateSession(b *testing.B) { storetest.BenchUpdateSession(b, openBench) }
