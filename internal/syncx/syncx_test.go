package syncx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a busy group = %v, want the deadline", err)
	}
	wg.Done()
	if err := Wait(context.Background(), &wg); err != nil {
		t.Fatalf("Wait on a done group = %v", err)
	}
}

// A Tail keeps the last max bytes, across writes of any size.
func TestTail(t *testing.T) {
	tl := NewTail(5)
	for _, w := range []string{"ab", "cdefg", "h"} {
		if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if got := tl.String(); got != "defgh" {
		t.Fatalf("kept %q, want defgh", got)
	}
	b := tl.Bytes()
	b[0] = 'x'
	if got := tl.String(); got != "defgh" {
		t.Fatalf("Bytes is not a copy: kept %q", got)
	}
}

// Sleep waits out its time on a live context and ends early, saying so,
// when the context ends.
func TestSleep(t *testing.T) {
	start := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) || time.Since(start) < 20*time.Millisecond {
		t.Fatal("Sleep on a live context did not wait its time")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context reported it live")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Sleep on an ended context took %s", d)
	}
}
