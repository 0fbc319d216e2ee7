package memory

import (
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/storetest"
)

// opener opens the store of a test directory: a fresh one for a new
// directory, the same data again for one whose store was closed (the
// suite's Reopen case; a daemon's memory store never outlives it).
func opener() storetest.Opener {
	var mu sync.Mutex
	kept := map[string]*state{}
	return func(t *testing.T, dir string) berth.Store {
		mu.Lock()
		defer mu.Unlock()
		st, ok := kept[dir]
		if !ok {
			st = New().state
			kept[dir] = st
		}
		return &Store{state: st}
	}
}

func TestConformance(t *testing.T) {
	storetest.RunStoreTests(t, opener())
}

func TestHookConformance(t *testing.T) {
	storetest.RunHookStoreTests(t, opener())
}
