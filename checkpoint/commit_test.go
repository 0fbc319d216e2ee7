package checkpoint

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Commits that arrive while another writes wait and are written together:
// ten queued behind a writer go in one group, each listed, and listed
// again by a store that reads them from disk.
func TestCommitsAtOnceAreWrittenTogether(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	const n = 10
	pending := make([]*Pending, n)
	for i := range n {
		ws := t.TempDir()
		write(t, ws, "f", fmt.Sprintf("session %d", i), 0o644)
		p, err := s.Capture(ctx, fmt.Sprintf("ses_%02d", i), "turn_1", ws)
		must(t, err)
		pending[i] = p
	}
	// A writer at work.
	s.commitMu.Lock()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = pending[i].Commit() })
	}
	for queued := 0; queued < n; {
		time.Sleep(time.Millisecond)
		s.commitQMu.Lock()
		queued = len(s.commitQ)
		s.commitQMu.Unlock()
	}
	before := s.commitGroups.Load()
	s.commitMu.Unlock()
	wg.Wait()
	if g := s.commitGroups.Load() - before; g != 1 {
		t.Errorf("%d commits queued at once were written in %d groups, want 1", n, g)
	}
	again := New(s.dir, Options{})
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("commit %d: %v", i, errs[i])
		}
		for _, st := range []*Store{s, again} {
			if l, err := st.List(fmt.Sprintf("ses_%02d", i)); err != nil || len(l) != 1 || l[0].ID != pending[i].Checkpoint().ID {
				t.Fatalf("session %d lists %v %v, want its checkpoint", i, l, err)
			}
		}
	}
}
