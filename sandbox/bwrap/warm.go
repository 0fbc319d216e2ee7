package bwrap

import (
	"os"
	"sync"
)

// The first time a thread joins a v1 cgroup just made, the kernel takes
// 5–17 ms (a 6.18 kernel on a 2-vCPU VM; joining it again takes µs): the
// thread that forks bwrap paid it at every Start of a sandbox with a pids
// or memory limit, a third of a root daemon's bwrap create. A shim that
// waits for its job makes its sandbox's v1 cgroups ahead and has a thread
// of its own join and leave them once (Prewarm); the sandbox it then
// opens takes them (newCgroup), so the fork's join is the quick one. A
// root daemon's shim makes its sandbox's stage directory ahead too, its
// entries in it (newStage takes it), and every shim brings the view of
// /etc up to date ahead (viewahead.go; etcMounts takes it).

// warm is what Prewarm made ahead in this process.
var warm struct {
	mu sync.Mutex
	// started is set by Prewarm; cgReady and stageReady are closed once
	// the cgroups, the stage, are made (or not), each on its own: a job
	// for a sandbox waits only for what it takes.
	started             bool
	cgReady, stageReady chan struct{}
	// cg is the set of cgroups, nil when none could be made or it was
	// taken; stage is the stage directory, nil likewise.
	cg    *sandboxCgroup
	stage *stageDir
	// viewReady is closed once view, the view of /etc brought up to date
	// ahead, is made (or not).
	viewReady chan struct{}
	view      *viewAhead
	// viewTaken is the view a sandbox took, whose watch is ending.
	viewTaken *viewAhead
}

// Warm says what Prewarm makes ahead: the v1 cgroups of a sandbox with a
// pids limit (Pids) or a memory limit (Memory), the limits the daemon
// gives its sessions by default, and a root daemon's stage (Stage).
type Warm struct {
	Pids, Memory, Stage bool
	// EtcView is the provider's view of /etc (Options.EtcView), brought
	// up to date ahead when set.
	EtcView string
}

// Prewarm makes, in the background, what w asks of the next sandbox this
// process opens: the v1 cgroups, joined once with a thread of its own,
// the stage directory with its entries, and the view of /etc brought up
// to date under a watch. Each is made on a goroutine of its own, which
// the take of it (or drop) waits for. Cgroups are made only where
// the host's cgroups for them are v1 (bwrap is cloned into v2 ones) and
// can be made (a daemon that is not root cannot). drop removes what no
// sandbox took; call it once the process is done with sandboxes.
func Prewarm(w Warm) (drop func()) {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	if warm.started || (!w.Pids && !w.Memory && !w.Stage && w.EtcView == "") {
		return func() {}
	}
	warm.started = true
	if w.Pids || w.Memory {
		makeAhead(&warm.cgReady, &warm.cg, func() *sandboxCgroup { return makeWarmCgroup(w.Pids, w.Memory) })
	}
	if w.Stage {
		// Ahead of time only: newStage makes its own when this fails.
		makeAhead(&warm.stageReady, &warm.stage, func() *stageDir {
			sd, _ := newStageDir(stageDirsAhead, stageFilesAhead)
			return sd
		})
	}
	if w.EtcView != "" {
		makeAhead(&warm.viewReady, &warm.view, func() *viewAhead { return makeViewAhead("/etc", w.EtcView, etcEntries) })
	}
	return func() {
		if v := takeWarmView(); v != nil {
			v.end()
		}
		warm.mu.Lock()
		taken := warm.viewTaken
		warm.mu.Unlock()
		if taken != nil {
			taken.end()
			taken.wait()
		}
		if cg := takeWarm(); cg != nil {
			_ = cg.remove()
		}
		if sd := takeWarmStage(); sd != nil {
			_ = os.RemoveAll(sd.path)
		}
	}
}

// makeAhead makes one thing of warm's on a goroutine of its own, into
// *made, closing *ready once it is made (or not: nil). The caller holds
// warm.mu; takeAhead waits for it.
func makeAhead[T any](ready *chan struct{}, made **T, makeIt func() *T) {
	ch := make(chan struct{})
	*ready = ch
	go func() {
		defer close(ch)
		v := makeIt()
		warm.mu.Lock()
		*made = v
		warm.mu.Unlock()
	}()
}

// takeAhead returns what makeAhead made into *made, once, waiting for its
// making if it is under way; nil when nothing was (or is) made.
func takeAhead[T any](ready *chan struct{}, made **T) *T {
	warm.mu.Lock()
	ch := *ready
	warm.mu.Unlock()
	if ch == nil {
		return nil
	}
	<-ch
	warm.mu.Lock()
	defer warm.mu.Unlock()
	v := *made
	*made = nil
	return v
}

// resetWarm forgets what Prewarm made, for a test to prewarm again.
func resetWarm() {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	warm.started, warm.cgReady, warm.stageReady, warm.cg, warm.stage = false, nil, nil, nil, nil
	warm.viewReady, warm.view, warm.viewTaken = nil, nil, nil
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

// takeWarm returns the cgroups Prewarm made, once (see takeAhead).
func takeWarm() *sandboxCgroup { return takeAhead(&warm.cgReady, &warm.cg) }

// takeWarmStage returns the stage directory Prewarm made, once (see
// takeAhead); nil when there is none, or it lost
// an entry since (a cleaner of the temporary directory's): it is removed
// then, and newStage makes its own.
func takeWarmStage() *stageDir {
	sd := takeAhead(&warm.stageReady, &warm.stage)
	if sd == nil {
		return nil
	}
	for _, e := range append(append([]string{sd.path}, sd.spareDirs...), sd.spareFiles...) {
		if _, err := os.Lstat(e); err != nil {
			_ = os.RemoveAll(sd.path)
			return nil
		}
	}
	return sd
}

// takeWarmView returns the view Prewarm brought up to date ahead, once
// (see takeAhead), remembered for drop to wait for the end of its watch.
func takeWarmView() *viewAhead {
	v := takeAhead(&warm.viewReady, &warm.view)
	if v != nil {
		warm.mu.Lock()
		warm.viewTaken = v
		warm.mu.Unlock()
	}
	return v
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
