package bwrap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/procgroup"
)

// launch starts cmd (bwrap, or prlimit before it) from a thread that
// first does what used to take a shell and a mount(8) per bind: it joins
// the sandbox's v1 cgroups (pids, memory) and, for a stage, unshares its mount
// namespace and binds each source onto its entry. The child inherits both
// from the thread at fork; the thread is then put back as it was before
// any other goroutine may run on it. (It cannot simply end: bwrap's
// --die-with-parent is the death signal of the thread that forked it.)
// A thread that cannot be put back ends, and the child with it: launch
// then kills the child and fails.
func (s *Sandbox) launch(cmd *exec.Cmd) (*procgroup.Proc, error) {
	if s.stage == nil && (s.cgroup == nil || len(s.cgroup.tasks) == 0) {
		return procgroup.StartProc(cmd)
	}
	var proc *procgroup.Proc
	var err error
	onSpareThread(func() bool {
		var back *threadState
		back, err = s.prepareThread()
		if err == nil {
			proc, err = procgroup.StartProc(cmd)
		}
		if rerr := back.restore(); rerr != nil {
			if proc != nil {
				_ = procgroup.Signal(proc.Pid(), unix.SIGKILL)
				_, _ = proc.Wait()
				proc = nil
			}
			err = errors.Join(err, fmt.Errorf("the forking thread could not be put back: %w", rerr))
			return false
		}
		return true
	})
	return proc, err
}

// onSpareThread runs f locked to a thread other than the main one; when f
// returns false the thread has been changed for good and ends with the
// goroutine. (Go never ends the main thread but parks it, changed, for
// good: f is moved off it.)
func onSpareThread(f func() (restored bool)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Held here, the main thread cannot take the goroutine below.
			onSpareThread(f)
			runtime.UnlockOSThread()
			return
		}
		if f() {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// threadState is what prepareThread changed of the calling thread, to be
// put back.
type threadState struct {
	// mntNS and cwd are the thread's mount namespace and working
	// directory before it unshared (-1 when it did not).
	mntNS, cwd int
	// cgroups are the tasks files of the cgroups the thread left (none
	// when it did not).
	cgroups []string
}

// prepareThread puts the calling (locked) thread where bwrap must start:
// in the sandbox's v1 cgroups, and in a mount namespace of its own with the
// stage's binds made. What it changed is in the returned state, even on
// error.
func (s *Sandbox) prepareThread() (*threadState, error) {
	back := &threadState{mntNS: -1, cwd: -1}
	if s.cgroup != nil {
		if err := s.cgroup.join(back); err != nil {
			return back, err
		}
	}
	if s.stage == nil {
		return back, nil
	}
	var err error
	if back.mntNS, err = unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return back, fmt.Errorf("open the mount namespace: %w", err)
	}
	if back.cwd, err = unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return back, fmt.Errorf("open the working directory: %w", err)
	}
	return back, s.stage.bind(s.ws)
}

// restore puts the thread back in the mount namespace, working directory
// and cgroup it had. (Its filesystem attributes stay its own copy: berth
// changes neither its working directory nor its umask after start.)
func (t *threadState) restore() error {
	var errs []error
	if t.mntNS >= 0 {
		if t.cwd >= 0 {
			if err := unix.Setns(t.mntNS, unix.CLONE_NEWNS); err != nil {
				errs = append(errs, fmt.Errorf("setns: %w", err))
			} else if err := unix.Fchdir(t.cwd); err != nil {
				errs = append(errs, fmt.Errorf("fchdir: %w", err))
			}
			_ = unix.Close(t.cwd)
		}
		_ = unix.Close(t.mntNS)
	}
	for _, tasks := range t.cgroups {
		if err := joinThread(tasks); err != nil {
			errs = append(errs, fmt.Errorf("leave the sandbox's cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// join moves the calling (locked) thread into c's v1 cgroups, noting in
// back the ones it leaves, to go back to.
func (c *sandboxCgroup) join(back *threadState) error {
	for i, tasks := range c.tasks {
		if err := joinThread(tasks); err != nil {
			return fmt.Errorf("join the sandbox's cgroup: %w", err)
		}
		back.cgroups = append(back.cgroups, c.leave[i])
	}
	return nil
}

// joinThread moves the calling thread into a v1 cgroup through its
// "tasks" file, which takes a thread id.
func joinThread(tasks string) error {
	return os.WriteFile(tasks, []byte(strconv.Itoa(unix.Gettid())), 0)
}

// bind unshares the calling thread's mount namespace (made private, so
// nothing propagates back to the host's) and binds each source onto its
// entry of the stage, recursively, as mount --rbind did. The workspace's
// entry must then be the directory pinned at Open (same device and
// inode): a path swapped for a link since gets nothing bound and nothing
// run. (The descriptor cannot be bound itself: mount(2) refuses a source
// from another mount namespace.)
func (st *stage) bind(pinned *os.File) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the stage's mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the stage's mounts private: %w", err)
	}
	for i, src := range st.srcs {
		entry := st.entries[i]
		if err := unix.Mount(src, entry, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto the stage: %w", src, err)
		}
		if !st.pins[i] || pinned == nil {
			continue
		}
		var got, want unix.Stat_t
		if err := unix.Stat(entry, &got); err != nil {
			return fmt.Errorf("the stage's entry of the workspace: %w", err)
		}
		if err := unix.Fstat(int(pinned.Fd()), &want); err != nil {
			return fmt.Errorf("the workspace opened: %w", err)
		}
		if got.Dev != want.Dev || got.Ino != want.Ino {
			return fmt.Errorf("the workspace %s is no longer the directory the sandbox opened (a symbolic link was planted on its path?)", src)
		}
	}
	return nil
}
