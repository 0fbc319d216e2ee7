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
