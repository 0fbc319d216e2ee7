package bwrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// defaultPath is the sandbox's PATH when neither the sandbox's Env nor the
// daemon has one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Descriptor numbers bwrap gets (exec.Cmd.ExtraFiles start at 3).
const (
	fdInfo    = 3
	fdArgs    = 4
	fdPasswd  = 5
	fdGroup   = 6
	fdSeccomp = 7
	// With network on only.
	fdBlock  = 8
	fdResolv = 9
	// The stage's copies of read-only files, from here up.
	fdCopies = 10
)

// filter is the seccomp program of every sandbox (seccompProgram);
// lenientFilter the same without its deny list, for tests to compare.
var (
	filter        = sync.OnceValues(func() ([]byte, bool) { return seccompProgram(true) })
	lenientFilter = sync.OnceValues(func() ([]byte, bool) { return seccompProgram(false) })
)

// Sandbox runs one session's processes, each in a bwrap of its own with
// the same filesystem (but its own /tmp).
type Sandbox struct {
	p       *Provider
	cfg     core.SandboxConfig
	home    string
	mounts  mounts
	passwd  []byte
	group   []byte
	prlimit string
	// cgroup is the sandbox's cgroups when Limits.Pids (and the host lets
	// the provider make one) or Limits.MemoryBytes is set.
	cgroup *sandboxCgroup
	// stage is set when bwrap runs as the host uid (a root daemon);
	// staged are then the mounts as bwrap gets them, their sources on the
	// stage.
	stage  *stage
	staged mounts
	// ws is the workspace pinned at Open when there is a stage: its
	// binds go through /proc/<daemon>/fd/<n>. Closed by Close.
	ws *os.File

	mu     sync.Mutex
	closed bool
	// procs are the processes started and not yet gone.
	procs map[*Process]struct{}
}

var _ core.Sandbox = (*Sandbox)(nil)

// Start starts spec in a new bwrap. The environment is the sandbox's Env,
// PATH (the daemon's when Env has none), HOME = the sandbox's home (a
// private tmpfs when it has none), then spec.Env, later entries winning.
// The working directory is spec.Dir (relative to the workspace when
// relative) or the workspace; it must exist inside the sandbox. spec.Path
// must be found inside the sandbox, in PATH when it has no "/". ctx only
// bounds the start: the process outlives it and ends through
// Process.Stop.
//
// Start returns once the process exists inside the sandbox, so that a
// signal sent right after reaches it.
//
// Errors: EInvalid for a bad spec or a working directory missing inside,
// EUnavailable when the program is not found inside, bwrap cannot be
// started or the sandbox is closed.
func (s *Sandbox) Start(ctx context.Context, spec core.ProcSpec) (core.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.Path == "" {
		return nil, core.Errorf(core.EInvalid, "bwrap: no program to start")
	}
	if err := boxutil.CheckInput("bwrap", spec); err != nil {
		return nil, err
	}
	env, err := s.environ(spec.Env)
	if err != nil {
		return nil, err
	}
	dir := s.cfg.Workspace
	if spec.Dir != "" {
		dir = spec.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.cfg.Workspace, dir)
		}
	}
	dir = filepath.Clean(dir)
	if !s.isDir(dir) {
		return nil, core.Errorf(core.EInvalid, "bwrap: the working directory does not exist in the sandbox")
	}
	if !s.findProgram(spec.Path, dir, boxutil.EnvValue(env, "PATH")) {
		return nil, core.Errorf(core.EUnavailable, "bwrap: command %q not found in the sandbox", filepath.Base(spec.Path))
	}

	sealInherited()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, core.Errorf(core.EUnavailable, "bwrap: sandbox is closed")
	}
	if s.stage != nil {
		// Directories the daemon made in the workspace since Open (a
		// working directory) become the host uid's, as Open's were,
		// through the workspace Open pinned (open while s.mu is held:
		// Close takes it first).
		if rel, err := filepath.Rel(s.cfg.Workspace, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			err = boxutil.ChownPathAt(s.ws, rel, s.p.hostUID, s.p.hostUID)
			if err != nil {
				return nil, core.WrapError(core.EInternal, err, "bwrap: cannot give the working directory to uid %d", s.p.hostUID)
			}
		}
	}
	p, err := s.start(ctx, spec, env, dir)
	if err != nil {
		return nil, err
	}
	s.procs[p] = struct{}{}
	go p.reap()
	return p, nil
}

// Close stops every process the sandbox still runs (SIGKILL: the whole
// pid namespace of each goes) and waits until they are gone or ctx ends,
// then refuses later Starts. The workspace and home are not touched.
// Closing twice is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	procs := slices.Collect(maps.Keys(s.procs))
	s.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.cgroup != nil {
		if err := s.cgroup.remove(); err != nil {
			return fmt.Errorf("bwrap: remove the sandbox's cgroup: %w", err)
		}
	}
	if s.ws != nil {
		_ = s.ws.Close()
	}
	if s.stage != nil {
		return s.stage.remove()
	}
	return nil
}

// bwrapMounts are the mounts as bwrap's command line gives them: through
// the stage when there is one.
func (s *Sandbox) bwrapMounts() mounts {
	if s.stage != nil {
		return s.staged
	}
	return s.mounts
}

// forget drops a process that is gone.
func (s *Sandbox) forget(p *Process) {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
}

// environ builds a process's environment as sorted "K=V" entries. It is
// never nil: a nil exec.Cmd.Env would hand the daemon's environment over.
func (s *Sandbox) environ(extra []string) ([]string, error) {
	m := maps.Clone(s.cfg.Env)
	if m == nil {
		m = make(map[string]string)
	}
	if _, ok := m["PATH"]; !ok {
		m["PATH"] = defaultPath
		if p, ok := os.LookupEnv("PATH"); ok && p != "" {
			m["PATH"] = p
		}
	}
	m["HOME"] = s.home
	return boxutil.Environ("bwrap", m, extra)
}

// isDir reports whether dir, a path inside the sandbox, will be a
// directory there.
func (s *Sandbox) isDir(dir string) bool {
	host, exists := s.mounts.resolve(dir)
	if host == "" {
		return exists
	}
	fi, err := os.Stat(host)
	return err == nil && fi.IsDir()
}

// findProgram reports whether path names a program inside the sandbox: as
// is when it holds a "/" (relative to dir), else in a directory of
// pathList. It looks at the host files behind the sandbox's mounts; a
// symbolic link on the host is taken as found, as its target may only
// make sense inside.
func (s *Sandbox) findProgram(path, dir, pathList string) bool {
	if strings.Contains(path, "/") {
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		return s.isProgram(path)
	}
	for _, d := range filepath.SplitList(pathList) {
		if filepath.IsAbs(d) && s.isProgram(filepath.Join(d, path)) {
			return true
		}
	}
	return false
}

// isProgram reports whether p, inside the sandbox, is an executable file.
func (s *Sandbox) isProgram(p string) bool {
	host, _ := s.mounts.resolve(p)
	if host == "" {
		return false
	}
	fi, err := os.Lstat(host)
	if err != nil {
		return false
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return true
	}
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// sealInherited marks every descriptor of the daemon from 3 up
// close-on-exec, once. Go opens its own descriptors so, but those the
// daemon inherited from whatever started it are not, and bwrap would pass
// them on into the sandbox (a pipe to a supervisor, a socket). exec.Cmd
// still hands bwrap the descriptors it is given.
var sealInherited = sync.OnceFunc(func() {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Kernels before 5.11: one by one.
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
})

// errNoSandbox reports a bwrap that ended before running the process.
var errNoSandbox = errors.New("bwrap ended before the process started")
