package session

import (
	"context"
	"testing"
	"time"
)

// A boot's reattach waits while a read is in flight, goes on once it
// ends, and never waits past its bound.
func TestReadGateLetsReadsThroughFirst(t *testing.T) {
	var g readGate
	ctx := context.Background()
	t0 := time.Now()
	g.wait(ctx, time.Hour)
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("with no read in flight the wait took %s", d)
	}
	done := g.Start()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		g.wait(ctx, time.Hour)
	}()
	select {
	case <-waited:
		t.Fatal("the wait returned with a read in flight")
	case <-time.After(100 * time.Millisecond):
	}
	done()
	done() // once only
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not return once the read ended")
	}
	// A read that never ends holds the boot up for the bound only.
	never := g.Start()
	defer never()
	t0 = time.Now()
	g.wait(ctx, 50*time.Millisecond)
	if d := time.Since(t0); d < 50*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the bounded wait took %s", d)
	}
	if n := g.InFlight(); n != 1 {
		t.Fatalf("%d reads in flight, want 1", n)
	}
}
