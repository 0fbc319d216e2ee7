// Package probe finds out, once per daemon and in the background, which
// sandbox providers work on this machine: a bwrap trial run takes tens of
// milliseconds that the API's reads, the store's open and the boot's
// reconcile need not wait for. What needs a provider's answer waits for
// it (Err).
package probe

import (
	"context"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/syncx"
)

// Set is the probes of a daemon's providers. Its methods are safe for
// concurrent use.
type Set struct {
	providers map[string]berth.SandboxProvider
	// errs is each provider's answer as it comes, under mu; all of them
	// are set once done is closed.
	mu   sync.Mutex
	errs map[string]error
	done chan struct{}
	// running counts the goroutine that probes, stop ends it.
	running sync.WaitGroup
	stop    context.CancelFunc
	// started is set by the first Start.
	started bool
}

// New returns the probes of providers, not started: until Start, every
// provider counts as working.
func New(providers map[string]berth.SandboxProvider) *Set {
	done := make(chan struct{})
	close(done)
	return &Set{providers: providers, errs: map[string]error{}, done: done, stop: func() {}}
}

// Start probes every provider at once on a goroutine Close waits for.
// It is called before Err, by one goroutine; a second Start does nothing
// (a daemon starts its probes before the manager that owns them opens).
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.done = make(chan struct{})
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		defer close(s.done)
		defer cancel()
		var wg sync.WaitGroup
		for name, p := range s.providers {
			wg.Go(func() {
				err := p.Probe(pctx)
				s.mu.Lock()
				s.errs[name] = err
				s.mu.Unlock()
			})
		}
		wg.Wait()
	}()
}

// Done is closed once the probes are done (at once before Start).
func (s *Set) Done() <-chan struct{} { return s.done }

// Err is the probe's answer for the provider named name (nil: it works
// here), once the probes are done; an unknown name is nil.
func (s *Set) Err(name string) error {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs[name]
}

// Answered is Err without the wait: done is false while the provider's
// probe runs. An unknown name, or any before Start, is done and nil.
func (s *Set) Answered(name string) (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.providers[name]; !known || !s.started {
		return true, nil
	}
	err, done = s.errs[name]
	return done, err
}

// Close stops the probes and returns once their goroutine has, or ctx
// ended.
func (s *Set) Close(ctx context.Context) error {
	s.stop()
	return syncx.Wait(ctx, &s.running)
}
