package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/wsdir"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// DefaultHostUID is the host uid (and gid) a root daemon's sandboxes run
// as unless Options say otherwise: above the range of human users
// (login.defs UID_MAX 60000) and of systemd's dynamic users
// (61184-65519), below the subordinate ids rootless containers are given
// (/etc/subuid starts at 100000), and not nobody (65534), which other
// services share. No other process of the host should run as it: it could
// signal the sandboxes' outer bwrap and owns their files.
const DefaultHostUID = 99999

// stage is how a sandbox of a root daemon, whose bwrap runs as the host
// uid, gets at the host paths it binds (a workspace under root's 0700
// home, a temporary directory of 0700): each is bound, in a mount
// namespace of the sandbox's own made by the thread that forks bwrap
// (stage.bind), onto an entry of a directory only the host uid's bwrap
// needs to cross. The daemon's mounts are left alone.
type stage struct {
	dir *stageDir
	// srcs are the host paths bound, entries where each is bound.
	srcs, entries []string
	// pins are, beside srcs, whether each must turn out to be the
	// workspace pinned at Open once bound.
	pins []bool
	// copies are read-only files the host uid may not read, given to
	// bwrap as copies on descriptors from fdCopies up.
	copies []string
	uid    int
	// setpriv drops to the host uid when a prlimit runs first ("" when
	// none is needed: Go drops the ids itself).
	setpriv string
}

// maxCopyBytes bounds a read-only file given to the sandbox as a copy.
const maxCopyBytes = 1 << 20

// readableBy reports whether uid (as its own gid, with no other groups)
// may read the file fi by its mode bits.
func readableBy(fi os.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	switch {
	case int(st.Uid) == uid:
		return st.Mode&0o400 != 0
	case int(st.Gid) == uid:
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

// copyFiles reads the stage's copies into memory files, in order, for
// bwrap's descriptors from fdCopies up. The caller closes them.
func (st *stage) copyFiles() ([]*os.File, error) {
	var out []*os.File
	for _, src := range st.copies {
		b, err := os.ReadFile(src)
		if err == nil && len(b) > maxCopyBytes {
			err = fmt.Errorf("%d bytes, over %d", len(b), maxCopyBytes)
		}
		var f *os.File
		if err == nil {
			f, err = memFile("bind-copy", b)
		}
		if err != nil {
			for _, f := range out {
				_ = f.Close()
			}
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// dropping reports whether the provider starts bwrap as the host uid: the
// daemon is root.
func (p *Provider) dropping() bool { return p.hostUID > 0 }

// FileOwner is the host uid the sandbox's files belong to when the daemon
// is root (the host uid, as gid too); ok is false otherwise (they belong
// to the daemon's user).
func (p *Provider) FileOwner() (uid, gid int, ok bool) {
	return p.hostUID, p.hostUID, p.dropping()
}

// hostCredential is what a child started as the host uid gets before its
// exec: uid and gid (real, effective, saved) the host uid, no
// supplementary groups, and so no capabilities: setpriv --reuid --regid
// --clear-groups, without the exec.
func (p *Provider) hostCredential() *syscall.Credential {
	id := uint32(p.hostUID)
	return &syscall.Credential{Uid: id, Gid: id, Groups: []uint32{}}
}

// dropArgs is setpriv's command line that starts the rest as the host uid
// and gid, with no supplementary groups (and so no capabilities).
func (p *Provider) dropArgs(setpriv string) []string {
	id := strconv.Itoa(p.hostUID)
	return []string{setpriv, "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}
}

// giveToHostUID gives the host uid what the sandbox writes to: the
// session's private home, whole; in the workspace and the writable binds
// what belongs to root (the daemon made it, or the user gave a directory
// of root's), never the hidden paths nor a file with other links. A
// workspace that is a directory people share (wsdir.Check) is refused
// first: nothing of it changes hands.
//
// ws is the workspace, pinned by wsdir.OpenNoFollow: the check and the
// walk go through it, never through the path, which a sandbox may have
// redirected.
func (p *Provider) giveToHostUID(cfg core.SandboxConfig, ws *os.File) error {
	id := p.hostUID
	if !cfg.ManagedWorkspace {
		if err := wsdir.Check(ws, cfg.Workspace, "workspace", append([]int{id}, cfg.WorkspaceOwners...)); err != nil {
			return err
		}
	}
	if cfg.Home != "" {
		if err := boxutil.ChownTree(cfg.Home, id, id, false, nil); err != nil {
			return core.WrapError(core.EInternal, err, "bwrap: cannot give the session's home to uid %d", id)
		}
	}
	if err := boxutil.ChownTreeAt(ws, id, id, true, cfg.Hide); err != nil {
		return core.WrapError(core.EInternal, err, "bwrap: cannot give the workspace to uid %d", id)
	}
	for i, b := range cfg.Binds {
		if b.Writable {
			if err := boxutil.ChownTree(b.Source, id, id, true, cfg.Hide); err != nil {
				return core.WrapError(core.EInternal, err, "bwrap: cannot give writable bind %d to uid %d", i, id)
			}
		}
	}
	return nil
}

// newStage makes the stage for ms: an entry per bind of the workspace,
// the home and the caller's binds, whose sources it records. It returns
// the mounts with those sources replaced by their entries, for bwrap's
// command line. The bind of ws (the workspace's path) must turn out to
// be pinned, the directory Open holds.
func (p *Provider) newStage(ms mounts, ws string, pinned *os.File, prlimit bool) (*stage, mounts, error) {
	setpriv := ""
	if prlimit {
		var err error
		if setpriv, err = exec.LookPath("setpriv"); err != nil {
			return nil, nil, core.WrapError(core.EUnavailable, err, "bwrap: a root daemon that limits open files needs setpriv(1) (Debian package util-linux)")
		}
	}
	// Made ahead by a shim waiting for its job, or now.
	dir := takeWarmStage()
	if dir == nil {
		var err error
		if dir, err = newStageDir(0, 0); err != nil {
			return nil, nil, core.WrapError(core.EUnavailable, err, "bwrap: cannot make the stage directory")
		}
	}
	st := &stage{dir: dir, uid: p.hostUID, setpriv: setpriv}
	fail := func(err error) (*stage, mounts, error) {
		_ = st.remove()
		return nil, nil, core.WrapError(core.EUnavailable, err, "bwrap: cannot prepare the stage directory")
	}
	out := make(mounts, len(ms))
	copy(out, ms)
	for i, m := range out {
		if !m.user {
			continue
		}
		fi, err := os.Stat(m.src)
		if err != nil {
			return fail(err)
		}
		if m.kind == roBind && fi.Mode().IsRegular() && fi.Size() <= maxCopyBytes && !readableBy(fi, p.hostUID) {
			// A read-only file the host uid may not read (credentials
			// of root's, 0600): a copy the daemon reads at each Start.
			out[i].kind, out[i].fd = dataFile, fdCopies+len(st.copies)
			st.copies = append(st.copies, m.src)
			continue
		}
		entry, err := dir.entry(fi.IsDir())
		if err != nil {
			return fail(err)
		}
		pin := m.kind == rwBind && m.src == ws && pinned != nil
		st.srcs, st.entries = append(st.srcs, m.src), append(st.entries, entry)
		st.pins = append(st.pins, pin)
		out[i].src = entry
	}
	return st, out, nil
}

// remove deletes the stage directory; its entries are only mount points
// in the namespaces of the sandbox's processes, which are gone.
func (st *stage) remove() error {
	if err := os.RemoveAll(st.dir.path); err != nil {
		return fmt.Errorf("bwrap: remove the stage directory: %w", err)
	}
	return nil
}
