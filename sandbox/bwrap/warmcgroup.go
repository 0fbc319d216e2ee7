package bwrap

import (
	"sync"
)

// The first time a thread joins a v1 cgroup just made, the kernel takes
// 5–17 ms (a 6.18 kernel on a 2-vCPU VM; joining it again takes µs): the
// thread that forks bwrap paid it at every Start of a sandbox with a pids
// or memory limit, a third of a root daemon's bwrap create. A shim that
// waits for its job makes its sandbox's v1 cgroups ahead and has a thread
// of its own join and leave them once (Prewarm); the sandbox it then
// opens takes them (newCgroup), so the fork's join is the quick one.

// warm is the one set of cgroups Prewarm made ahead in this process.
var warm struct {
	mu sync.Mutex
	// ready is closed once the set is made and joined, or not (nil before
	// Prewarm).
	ready chan struct{}
	// cg is the set, nil when none could be made or it was taken.
	cg *sandboxCgroup
}

// Prewarm makes, in the background, the v1 cgroups of the next sandbox
// with limits this process opens — a pids cgroup when pids is set, a
// memory cgroup when memory is (the limits the daemon gives its sessions
// by default) — and joins them once with a thread of its own. It does
// nothing where the host's cgroups for them are v2 (bwrap is cloned into
// those) or cannot be made (a daemon that is not root). drop removes them
// if no sandbox took them; call it once the process is done with
// sandboxes.
func Prewarm(pids, memory bool) (drop func()) {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	if warm.ready != nil || (!pids && !memory) {
		return func() {}
	}
	ready := make(chan struct{})
	warm.ready = ready
	go func() {
		defer close(ready)
		cg := makeWarmCgroup(pids, memory)
		warm.mu.Lock()
		warm.cg = cg
		warm.mu.Unlock()
	}()
	return func() {
		if cg := takeWarm(); cg != nil {
			_ = cg.remove()
		}
	}
}

// makeWarmCgroup makes the cgroups of Prewarm, under v1 only, and has a
// thread join them and go back; nil when there are none to make, or
// they cannot be (Prewarm is only ahead of time: the sandbox makes its
// own then).
func makeWarmCgroup(pids, memory bool) *sandboxCgroup {
	if (pids && !v1Root(pidsRoot())) || (memory && !v1Root(memoryRoot())) {
		return nil
	}
	cg, err := makeCgroupDirs(pids, memory)
	if err != nil {
		return nil
	}
	onSpareThread(func() bool {
		back := &threadState{mntNS: -1, cwd: -1}
		err = cg.join(back)
		return back.restore() == nil
	})
	if err != nil {
		_ = cg.remove()
		return nil
	}
	return cg
}

// v1Root reports whether r is a v1 cgroup this process may make children
// in.
func v1Root(r cgroupRoot) bool { return r.dir != "" && !r.v2 }

// takeWarm returns the cgroups Prewarm made, once, waiting for their
// making if it is under way; nil when there are none.
func takeWarm() *sandboxCgroup {
	warm.mu.Lock()
	ready := warm.ready
	warm.mu.Unlock()
	if ready == nil {
		return nil
	}
	<-ready
	warm.mu.Lock()
	defer warm.mu.Unlock()
	cg := warm.cg
	warm.cg = nil
	return cg
}

// takeWarmFor returns the cgroups Prewarm made when they have exactly the
// controllers a sandbox with these limits needs; others are removed.
func takeWarmFor(pids, memory bool) *sandboxCgroup {
	cg := takeWarm()
	if cg != nil && ((cg.pidsDir != "") != pids || (cg.memDir != "") != memory) {
		_ = cg.remove()
		return nil
	}
	return cg
}
