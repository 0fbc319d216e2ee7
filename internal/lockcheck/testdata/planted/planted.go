// Package planted holds paths that keep the lock order and paths that do
// not: each line that must be found says what with a want comment.
package planted

import (
	"sync"
	"time"
)

// T has two locks.
// Lock order: T.a > T.b
type T struct {
	a sync.Mutex
	b sync.RWMutex
	h *H
	n int
}

// H is what T is handed.
type H struct {
	Store func() int
	// Callbacks: the owner's.
	Lost func(id string)
	Tree Tree
}

// Tree is a callback interface.
type Tree interface{ Stop() }

// U has a lock the order leaves out.
type U struct {
	mu sync.Mutex // want "U.mu is not in the lock order"
}

func (t *T) inOrder() {
	t.a.Lock()
	t.b.Lock()
	t.b.Unlock()
	t.a.Unlock()
}

func (t *T) against() {
	t.b.RLock()
	defer t.b.RUnlock()
	t.a.Lock() // want "takes T.a holding T.b"
	t.a.Unlock()
}

func (t *T) twice() {
	t.a.Lock()
	t.helper()
	t.a.Unlock()
}

func (t *T) helper() {
	t.a.Lock() // want "takes T.a holding T.a, against the lock order (via T.twice → T.helper)"
	t.a.Unlock()
}

func (t *T) saveLocked() {
	t.n = t.h.Store() // a leaf
	t.h.Lost("x")     // want "calls H.Lost holding T.a"
}

func (t *T) tree() {
	t.a.Lock()
	defer t.a.Unlock()
	t.h.Tree.Stop() // want "calls H.Tree.Stop holding T.a"
}

func (t *T) afterUnlock() {
	t.a.Lock()
	t.n++
	t.a.Unlock()
	t.h.Lost("x")
}

// unlock releases a, then tells the owner.
func (t *T) unlock() {
	t.a.Unlock()
	t.h.Lost("x") // want "calls H.Lost holding T.b (via T.outerB → T.unlock)"
}

func (t *T) throughUnlock() {
	t.a.Lock()
	t.n++
	t.unlock()
}

func (t *T) outerB() {
	t.a.Lock()
	t.b.Lock()
	defer t.b.Unlock()
	t.unlock()
}

func (t *T) branches(fail bool) {
	t.a.Lock()
	if fail {
		t.a.Unlock()
		return
	}
	switch t.n {
	case 1:
		t.a.Unlock()
		return
	}
	t.a.Unlock()
	t.h.Lost("x")
}

func (t *T) mayHold(fail bool) {
	if fail {
		t.a.Lock()
	}
	t.h.Lost("x") // want "calls H.Lost holding T.a"
}

func (t *T) loop() {
	for i := 0; i < t.n; i++ {
		t.a.Lock()
		if i == 2 {
			break
		}
		t.a.Unlock()
	}
	t.h.Lost("x") // want "calls H.Lost holding T.a"
}

func (t *T) timer() {
	t.a.Lock()
	defer t.a.Unlock()
	time.AfterFunc(time.Second, func() {
		t.a.Lock()
		defer t.a.Unlock()
		t.n++
	})
	go func() {
		t.h.Lost("x")
	}()
}

func (t *T) literal() {
	t.a.Lock()
	defer t.a.Unlock()
	tell := func() {
		t.h.Lost("x") // want "calls H.Lost holding T.a"
	}
	tell()
}

func (t *T) deferredTell() {
	t.a.Lock()
	defer t.h.Lost("x") // want "calls H.Lost holding T.a"
	t.n++
}

func (t *T) deferredAfterUnlock() {
	defer t.h.Lost("x")
	t.a.Lock()
	defer t.a.Unlock()
	t.n++
}

// Ask calls what it was handed.
func (t *T) Ask(busy func() bool) bool {
	t.a.Lock()
	defer t.a.Unlock()
	return busy() // want "calls busy (a func T.Ask was handed) holding T.a"
}

func (t *T) unlocked() {
	t.countLocked() // want "calls T.countLocked without holding T.a"
}

func (t *T) countLocked() { t.n++ }

func (t *T) tryLock() bool {
	t.b.Lock()
	defer t.b.Unlock()
	if !t.a.TryLock() {
		return false
	}
	t.a.Unlock()
	return true
}
