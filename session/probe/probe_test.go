package probe

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// fake is a provider whose probe answers err, or waits for its context
// when hang is set.
type fake struct {
	berth.SandboxProvider
	err  error
	hang bool
}

func (f fake) Probe(ctx context.Context) error {
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

// TestErrWaitsForTheProbes: before Start every provider counts as working;
// after, Err gives each probe's answer; Close ends a probe that hangs.
func TestErrWaitsForTheProbes(t *testing.T) {
	down := errors.New("no engine")
	s := New(map[string]berth.SandboxProvider{"up": fake{}, "down": fake{err: down}, "slow": fake{hang: true}})
	if s.Err("down") != nil {
		t.Fatal("a provider counts as down before any probe")
	}
	s.Start(context.Background())
	answered := make(chan error, 1)
	go func() { answered <- s.Err("down") }()
	select {
	case err := <-answered:
		t.Fatalf("Err answered %v before every probe was done", err)
	case <-time.After(50 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; !errors.Is(err, down) {
		t.Fatalf("down: %v", err)
	}
	if s.Err("up") != nil || s.Err("slow") == nil {
		t.Fatalf("up %v, slow %v", s.Err("up"), s.Err("slow"))
	}
}

// counting is a provider that counts its probes.
type counting struct {
	berth.SandboxProvider
	n *atomic.Int32
}

func (c counting) Probe(context.Context) error {
	c.n.Add(1)
	return nil
}

// A daemon starts the probes before its manager, whose open starts them
// again: the second Start probes nothing.
func TestASecondStartProbesNothing(t *testing.T) {
	var n atomic.Int32
	s := New(map[string]berth.SandboxProvider{"one": counting{n: &n}})
	s.Start(context.Background())
	s.Start(context.Background())
	if err := s.Err("one"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d probes, want 1", got)
	}
}

// Done is closed before Start, then once every probe has answered.
func TestDoneOnceTheProbesAnswered(t *testing.T) {
	release := make(chan struct{})
	s := New(map[string]berth.SandboxProvider{"held": held{release: release}})
	select {
	case <-s.Done():
	default:
		t.Fatal("Done is open before Start")
	}
	s.Start(context.Background())
	select {
	case <-s.Done():
		t.Fatal("Done closed while a probe runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done still open once the probe answered")
	}
}

// held is a provider whose probe answers once release is closed.
type held struct {
	berth.SandboxProvider
	release chan struct{}
}

func (h held) Probe(context.Context) error {
	<-h.release
	return nil
}

// TestAnsweredDoesNotWait: each provider's answer is there as soon as its
// own probe is over, while another's still runs; before Start, and for an
// unknown name, every answer is done and nil.
func TestAnsweredDoesNotWait(t *testing.T) {
	down := errors.New("no engine")
	s := New(map[string]berth.SandboxProvider{"down": fake{err: down}, "slow": fake{hang: true}})
	if done, err := s.Answered("down"); !done || err != nil {
		t.Fatalf("before Start: %v %v", done, err)
	}
	s.Start(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := s.Answered("down")
		if done {
			if !errors.Is(err, down) {
				t.Fatalf("down answered %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("down's probe never answered")
		}
		time.Sleep(time.Millisecond)
	}
	if done, _ := s.Answered("slow"); done {
		t.Fatal("slow answered while its probe hangs")
	}
	if done, err := s.Answered("unknown"); !done || err != nil {
		t.Fatalf("unknown: %v %v", done, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Answered("slow"); !done || err == nil {
		t.Fatalf("slow after Close: %v %v", done, err)
	}
}
