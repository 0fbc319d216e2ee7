package bwrap

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// startPlan is one start of bwrap as it is put together: the descriptors
// bwrap inherits, the network it waits for, and its command.
type startPlan struct {
	// extra are bwrap's descriptors from 3 on, in order (fdInfo…); ours
	// is every descriptor opened for the start, closed once it is over
	// (bwrap holds its own copies by then).
	extra, ours []*os.File
	// infoW is where bwrap reports its sandbox's pid, read from infoR.
	infoR, infoW *os.File
	// net is the network slirp4netns brings up once bwrap has made its
	// namespace; nil without network.
	net *userNet
	// words keeps bwrap's own stderr while it starts, when the caller
	// takes stderr with a writer of its own.
	words *startWords
	cmd   *exec.Cmd
}

// hand gives f to bwrap as its next descriptor.
func (pl *startPlan) hand(f *os.File) {
	pl.ours, pl.extra = append(pl.ours, f), append(pl.extra, f)
}

// close closes every descriptor opened for the start.
func (pl *startPlan) close() {
	for _, f := range pl.ours {
		_ = f.Close()
	}
}

// stopNet gives up the network of a start that did not launch bwrap.
func (pl *startPlan) stopNet() {
	if pl.net != nil {
		pl.net.stop()
	}
}

// start runs bwrap for spec and waits until the process exists inside.
//
// bwrap itself runs with an empty environment, and gets its options,
// the sandbox's environment included, through a memory file (--args):
// an environment of the caller's (LD_PRELOAD, GCONV_PATH…) must not reach
// the loader of bwrap, which runs outside the sandbox as the daemon, and
// the values (API keys) must not show in bwrap's command line, which
// every user of the host can read.
func (s *Sandbox) start(ctx context.Context, spec core.ProcSpec, env []string, dir string) (*Process, error) {
	pl := &startPlan{}
	defer pl.close()
	if err := s.plan(pl, spec, env, dir); err != nil {
		pl.stopNet()
		return nil, err
	}
	oomBase := s.cgroup.oomKills()
	// The stage's binds and the v1 cgroups are made in the thread that
	// forks.
	proc, err := s.launch(pl.cmd)
	if err != nil {
		pl.stopNet()
		return nil, core.WrapError(core.EUnavailable, err, "bwrap: cannot start bwrap: %s", oneLine(err.Error()))
	}
	// bwrap holds its own copies now; ours would keep the info pipe from
	// reporting EOF should bwrap die.
	_ = pl.infoW.Close()
	// The program's first input waits in its pipe while bwrap makes the
	// sandbox, not behind attach: the program may be reading by then.
	boxutil.WriteInput(proc.Stdin(), spec)
	p := &Process{sb: s, proc: proc, net: pl.net, pidfd: -1, oomBase: oomBase}
	p.Handle, p.ended = procgroup.NewHandle(proc.Stdin(), proc.Stdout(), proc.Stderr())
	if err := p.attach(ctx, pl.infoR); err != nil {
		return nil, pl.failed(p, proc, err)
	}
	pl.words.stop()
	return p, nil
}

// plan puts together the start of spec with the environment env in dir:
// bwrap's options and files, its network, the stage's copies, and its
// command.
func (s *Sandbox) plan(pl *startPlan, spec core.ProcSpec, env []string, dir string) error {
	var err error
	if pl.infoR, pl.infoW, err = os.Pipe(); err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot make a pipe")
	}
	pl.ours = append(pl.ours, pl.infoR, pl.infoW)
	pl.extra = append(pl.extra, pl.infoW) // fdInfo, then fdArgs, fdPasswd, fdGroup, fdSeccomp
	ownNet := s.cfg.Network && s.p.ownsNet()
	if err := s.planOptions(pl, env, dir, ownNet); err != nil {
		return err
	}
	if s.cfg.Network {
		if err := s.planNetwork(pl, ownNet); err != nil {
			return err
		}
	}
	if err := s.planCopies(pl); err != nil {
		return err
	}
	return s.planCommand(pl, spec, ownNet)
}

// planOptions hands bwrap its options (fdArgs: namespaces, mounts, the
// environment, its descriptors), the sandbox's passwd and group, and its
// seccomp program, each in a memory file.
func (s *Sandbox) planOptions(pl *startPlan, env []string, dir string, ownNet bool) error {
	opts := s.p.namespaceArgs(ownNet)
	opts = append(opts, s.bwrapMounts().args()...)
	opts = append(opts, "--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		opts = append(opts, "--setenv", k, v)
	}
	opts = append(opts, "--info-fd", strconv.Itoa(fdInfo), "--chdir", dir)
	if s.cfg.Network {
		opts = append(opts, "--block-fd", strconv.Itoa(fdBlock))
	}
	prog, filtered := filter()
	if s.p.lenient {
		prog, filtered = lenientFilter()
	}
	if filtered {
		opts = append(opts, "--seccomp", strconv.Itoa(fdSeccomp))
	}
	var argsData []byte
	for _, a := range opts {
		argsData = append(append(argsData, a...), 0)
	}
	for _, d := range []struct {
		name string
		data []byte
	}{{"bwrap-args", argsData}, {"passwd", s.passwd}, {"group", s.group}, {"seccomp", prog}} {
		f, err := memFile(d.name, d.data)
		if err != nil {
			return core.WrapError(core.EUnavailable, err, "bwrap: cannot make a memory file")
		}
		pl.hand(f)
	}
	return nil
}

// planNetwork hands bwrap the pipe it waits on (fdBlock), its network
// namespace made, until slirp4netns has brought the network up, and the
// sandbox's resolv.conf (fdResolv).
func (s *Sandbox) planNetwork(pl *startPlan, ownNet bool) error {
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot make a pipe")
	}
	pl.ours = append(pl.ours, blockR)
	// From here stopNet closes blockW.
	pl.net = &userNet{path: s.p.slirp, session: s.cfg.SessionID, block: blockW, own: ownNet}
	resolv, err := memFile("resolv.conf", []byte(slirpResolvConf))
	if err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot make a memory file")
	}
	pl.ours, pl.extra = append(pl.ours, resolv), append(pl.extra, blockR, resolv)
	return nil
}

// planCopies hands bwrap the stage's copies of read-only files, from
// fdCopies up, when there is a stage that has some.
func (s *Sandbox) planCopies(pl *startPlan) error {
	if s.stage == nil || len(s.stage.copies) == 0 {
		return nil
	}
	copies, err := s.stage.copyFiles()
	if err != nil {
		return core.WrapError(core.EUnavailable, err, "bwrap: cannot copy a read-only bind for the sandbox")
	}
	pl.ours = append(pl.ours, copies...)
	for len(pl.extra) < fdCopies-3 {
		pl.extra = append(pl.extra, nil) // closed in bwrap
	}
	pl.extra = append(pl.extra, copies...)
	return nil
}

// planCommand makes bwrap's command: its argv, the uid it runs as, its
// stdio, its namespaces and its cgroup.
func (s *Sandbox) planCommand(pl *startPlan, spec core.ProcSpec, ownNet bool) error {
	argv, attr := s.argv(spec)
	pl.cmd = &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         []string{}, // not nil: nil would pass the daemon's
		Dir:         "/",
		Stdin:       spec.Stdin,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		ExtraFiles:  pl.extra,
		SysProcAttr: attr,
	}
	// A caller that takes stderr with a writer of its own still gets
	// bwrap's words, and so does the start's error should it fail. (A
	// file is handed to bwrap as is: its words are in the file.)
	if _, isFile := spec.Stderr.(*os.File); spec.Stderr != nil && !isFile {
		pl.words = &startWords{w: spec.Stderr}
		pl.cmd.Stderr = pl.words
	}
	if ownNet {
		if pl.cmd.SysProcAttr == nil {
			pl.cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		ownNamespaces(pl.cmd.SysProcAttr)
	}
	if s.cgroup != nil && s.cgroup.v2Dir != "" {
		// Under cgroup v2 bwrap is born in the sandbox's cgroup
		// (clone3 CLONE_INTO_CGROUP), whatever uid it then runs as.
		cgfd, err := os.Open(s.cgroup.v2Dir)
		if err != nil {
			return core.WrapError(core.EUnavailable, err, "bwrap: cannot open the sandbox's cgroup")
		}
		pl.ours = append(pl.ours, cgfd)
		if pl.cmd.SysProcAttr == nil {
			pl.cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		pl.cmd.SysProcAttr.UseCgroupFD, pl.cmd.SysProcAttr.CgroupFD = true, int(cgfd.Fd())
	}
	return nil
}

// argv is the command line that runs spec in bwrap: behind setpriv when
// bwrap must drop to the host uid after a prlimit that runs as root,
// behind prlimit when open files are bounded. attr, when set, is the
// credential Go drops to in the child instead.
func (s *Sandbox) argv(spec core.ProcSpec) (argv []string, attr *syscall.SysProcAttr) {
	argv = append([]string{s.p.path, "--args", strconv.Itoa(fdArgs), "--", spec.Path}, spec.Args...)
	if s.stage != nil {
		// bwrap runs as the host uid, not as root: Go drops the ids in
		// the child before exec, or setpriv does after a prlimit that
		// runs as root (it may raise the limit).
		if s.prlimit != "" {
			argv = append(s.p.dropArgs(s.stage.setpriv), argv...)
		} else {
			attr = &syscall.SysProcAttr{Credential: s.p.hostCredential()}
		}
	}
	if s.prlimit != "" {
		// prlimit sets the limit on itself and execs the rest: same pid.
		n := s.cfg.Limits.OpenFiles
		argv = append([]string{s.prlimit, fmt.Sprintf("--nofile=%d:%d", n, n), "--"}, argv...)
	}
	return argv, attr
}

// failed reaps a bwrap whose process did not start, and returns why, with
// bwrap's own words.
func (pl *startPlan) failed(p *Process, proc *procgroup.Proc, err error) error {
	p.abort()
	// bwrap's own words, from the pipe or the caller's writer: the copy
	// into it is over once abort has reaped bwrap.
	said := stderrHead(proc)
	if pl.words != nil {
		said = pl.words.String()
	}
	if r := proc.Stdout(); r != nil {
		_ = r.Close()
	}
	cause := err
	if said = strings.TrimSpace(said); said != "" {
		cause = fmt.Errorf("%w: %s", err, said)
	}
	return core.WrapError(core.EUnavailable, cause, "bwrap: the sandbox did not start: %s", oneLine(cause.Error()))
}

// stderrHead is what bwrap wrote to the stderr pipe before failing (its
// first maxWords bytes); empty when the caller took stderr.
func stderrHead(proc *procgroup.Proc) string {
	r := proc.Stderr()
	if r == nil {
		return ""
	}
	defer r.Close()
	b, _ := io.ReadAll(io.LimitReader(r, maxWords))
	return string(b)
}

// memFile returns an unlinked in-memory file holding b, read from its
// start: bwrap reads --args and --ro-bind-data descriptors to their end.
func memFile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
