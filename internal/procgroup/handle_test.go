package procgroup

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// signals is a fake group for Handle.Escalate: it records what it is
// sent, and the process ends at the first SIGKILL.
type signals struct {
	mu    sync.Mutex
	sent  []syscall.Signal
	ended func(berth.ExitStatus, error)
}

func (s *signals) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, sig)
	if sig == syscall.SIGKILL && len(s.sent) == 2 {
		s.ended(berth.ExitStatus{Code: 137, Signal: "SIGKILL"}, nil)
	}
	return nil
}

func (s *signals) got() []syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Stops called together escalate once: SIGTERM, then SIGKILL when the
// grace is over, and each returns the status once the process has ended.
func TestHandleEscalateEscalatesOnce(t *testing.T) {
	e, ended := NewHandle(nil, nil, nil)
	g := &signals{ended: ended}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := e.Escalate(context.Background(), time.Millisecond, nil, g.signal); err != nil {
				t.Error(err)
			}
			if st, err := e.Wait(); st.Signal != "SIGKILL" || err != nil {
				t.Errorf("Wait after Stop: %+v, %v", st, err)
			}
		})
	}
	wg.Wait()
	if want := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}; !slices.Equal(g.got(), want) {
		t.Fatalf("signals sent: %v, want %v", g.got(), want)
	}
}

// A Stop whose context ends while another holds the group, in its grace,
// sends SIGKILL at once and returns the context's error.
func TestHandleEscalateOutOfTimeKillsEarly(t *testing.T) {
	e, ended := NewHandle(nil, nil, nil)
	g := &signals{ended: ended}
	first := make(chan error, 1)
	go func() { first <- e.Escalate(context.Background(), time.Hour, e.Done(), g.signal) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(g.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Escalate(ctx, time.Hour, nil, g.signal); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop out of time: %v", err)
	}
	// The first Stop, woken from its grace, may add a SIGKILL of its own.
	if want := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}; !slices.Equal(g.got()[:2], want) {
		t.Fatalf("signals sent: %v, want %v first", g.got(), want)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first Stop: %v", err)
	}
}

// A failing signal ends Stop with its error, and a later Stop signals
// again.
func TestHandleEscalateSignalError(t *testing.T) {
	e, _ := NewHandle(nil, nil, nil)
	refused := errors.New("refused")
	calls := 0
	fail := func(syscall.Signal) error { calls++; return refused }
	for range 2 {
		if err := e.Escalate(context.Background(), 0, nil, fail); !errors.Is(err, refused) {
			t.Fatalf("Stop: %v, want the signal's error", err)
		}
	}
	if calls != 2 {
		t.Fatalf("%d signals sent, want one SIGTERM a call", calls)
	}
}
