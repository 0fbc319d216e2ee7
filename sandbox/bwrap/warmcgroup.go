package bwrap

import (
	"errors"
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
	// cg is the set, nil when none could be made or it was taken;
	// pids and memory say which controllers it has.
	cg           *sandboxCgroup
	pids, memory bool
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
		cg, err := makeWarmCgroup(pids, memory)
		if err != nil {
			return
		}
		warm.mu.Lock()
		warm.cg, warm.pids, warm.memory = cg, pids, memory
		warm.mu.Unlock()
	}()
	return func() {
		if cg, _, _ := takeWarm(); cg != nil {
			_ = cg.remove()
		}
	}
}

// makeWarmCgroup makes the cgroups of Prewarm, under v1 only, and has a
// thread join them and go back.
func makeWarmCgroup(pids, memory bool) (*sandboxCgroup, error) {
	if (pids && !v1Root(pidsRoot())) || (memory && !v1Root(memoryRoot())) {
		return nil, errNotWarmed
	}
	cg, err := makeCgroupDirs(pids, memory)
	if err != nil {
		return nil, err
	}
	var joinErr error
	onSpareThread(func() bool {
		back := &threadState{mntNS: -1, cwd: -1}
		for i, tasks := range cg.tasks {
			if joinErr = joinThread(tasks); joinErr != nil {
				break
			}
			back.cgroups = append(back.cgroups, cg.leave[i])
		}
		return back.restore() == nil
	})
	if joinErr != nil {
		_ = cg.remove()
		return nil, joinErr
	}
	return cg, nil
}

// v1Root reports whether r is a v1 cgroup this process may make children
// in.
func v1Root(r cgroupRoot) bool { return r.dir != "" && !r.v2 }

// errNotWarmed says that Prewarm had nothing to make here.
var errNotWarmed = errors.New("no v1 cgroup to make ahead")

// takeWarm returns the cgroups Prewarm made and which controllers they
// have, once, waiting for their making if it is under way; nil when
// there are none.
func takeWarm() (cg *sandboxCgroup, pids, memory bool) {
	warm.mu.Lock()
	ready := warm.ready
	warm.mu.Unlock()
	if ready == nil {
		return nil, false, false
	}
	<-ready
	warm.mu.Lock()
	defer warm.mu.Unlock()
	cg, warm.cg = warm.cg, nil
	return cg, warm.pids, warm.memory
}

// takeWarmFor returns the cgroups Prewarm made when they have exactly the
// controllers a sandbox with these limits needs; others are removed.
func takeWarmFor(pids, memory bool) *sandboxCgroup {
	cg, hasPids, hasMemory := takeWarm()
	if cg != nil && (hasPids != pids || hasMemory != memory) {
		_ = cg.remove()
		return nil
	}
	return cg
}
