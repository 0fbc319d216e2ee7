package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
)

// DefaultHostUID is the host uid (and gid) a root daemon's containers run
// as when the engine maps no user namespace: the bwrap provider's
// DefaultHostUID, above human users and systemd's dynamic users, below
// the subordinate ids, and no login account (docs/api.md, "No local user
// reaches a session"). Without a user namespace the container's uid is the
// host's own, so a uid of a local user would let that user into the
// session through /proc/<pid>/root, its environment and ptrace.
const DefaultHostUID = 99999

// identity is who a sandbox's processes are, inside the container and as
// the host sees them.
type identity struct {
	// uid and gid are the container's user ("uid:gid" in the engine's
	// Config.User and every exec).
	uid, gid int
	// hostUID and hostGID are that user on the host: what the processes
	// write belongs to them, and only they (and root) may reach the
	// processes through /proc.
	hostUID, hostGID int
	// give is set when the daemon gives the sandbox's files to hostUID
	// (it is root, and hostUID is not its own).
	give bool
	// hostNS runs the container in the host's user namespace
	// (--userns=host): a non-root daemon on an engine that remaps ids,
	// whose containers must run as the daemon's own host uid.
	hostNS bool
}

// user is the engine's "uid:gid" of the container's user.
func (id identity) user() string { return fmt.Sprintf("%d:%d", id.uid, id.gid) }

// engineSecurity reads what an engine's SecurityOptions say of user
// namespaces: "name=userns" (dockerd --userns-remap) and "name=rootless".
func engineSecurity(opts []string) (userns, rootless bool) {
	for _, o := range opts {
		for kv := range strings.SplitSeq(o, ",") {
			switch kv {
			case "name=userns":
				userns = true
			case "name=rootless":
				rootless = true
			}
		}
	}
	return userns, rootless
}

// remapBase is the host uid and gid the engine maps the container's root
// to under --userns-remap, read from its data root, which dockerd names
// "<root>/<uid>.<gid>" then.
func remapBase(rootDir string) (uid, gid int, err error) {
	a, b, ok := strings.Cut(filepath.Base(rootDir), ".")
	if ok {
		uid, err = strconv.Atoi(a)
		if err == nil {
			gid, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || uid <= 0 || gid <= 0 {
		return 0, 0, fmt.Errorf("its data root %q does not end in <uid>.<gid>", filepath.Base(rootDir))
	}
	return uid, gid, nil
}

// chooseIdentity is who the sandboxes of a daemon running as euid:egid
// are on an engine that reports info:
//
//   - a daemon that is not root: itself (no chown is needed or possible;
//     other users are held out as from the daemon's own files), in the
//     host's user namespace when the engine remaps ids;
//   - a root daemon on an engine that remaps ids: Options.UID:GID in the
//     container, which the engine maps to its subordinate ids;
//   - a root daemon otherwise: Options.HostUID, in the container and on
//     the host alike.
//
// A rootless engine is refused: its only id that is the daemon's user on
// the host is the container's root, and berth runs no agent as root.
func chooseIdentity(info system.Info, euid, egid int, opts Options) (identity, error) {
	userns, rootless := engineSecurity(info.SecurityOptions)
	switch {
	case rootless:
		return identity{}, berth.Errorf(berth.EUnavailable, "docker: the engine is rootless: its containers' users are subordinate ids of its owner, save root, and berth runs no agent as root (use bwrap, or an engine that runs as root)")
	case euid != 0:
		return identity{uid: euid, gid: egid, hostUID: euid, hostGID: egid, hostNS: userns}, nil
	case userns:
		bu, bg, err := remapBase(info.DockerRootDir)
		if err != nil {
			return identity{}, berth.WrapError(berth.EUnavailable, err, "docker: the engine maps a user namespace but cannot say to which ids: %s", err)
		}
		return identity{uid: opts.UID, gid: opts.GID, hostUID: bu + opts.UID, hostGID: bg + opts.GID, give: true}, nil
	default:
		return identity{uid: opts.HostUID, gid: opts.HostUID, hostUID: opts.HostUID, hostGID: opts.HostUID, give: true}, nil
	}
}

// identity is who the provider's sandboxes are (chooseIdentity), from the
// engine's info, asked once: the answer is kept, an error is not.
func (p *Provider) identity(ctx context.Context) (identity, error) {
	p.whoMu.Lock()
	defer p.whoMu.Unlock()
	if p.who != nil {
		return *p.who, nil
	}
	res, err := p.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return identity{}, berth.WrapError(berth.EUnavailable, err, "docker: cannot read the engine's info at %s: %s", p.host, reason(ctx, err))
	}
	who, err := chooseIdentity(res.Info, os.Geteuid(), os.Getegid(), p.opts)
	if err != nil {
		return identity{}, err
	}
	p.who = &who
	return who, nil
}

// checkMapped checks that the container whose init is host pid pid runs
// uid:gid as the host's hostUID:hostGID, from its /proc uid_map and
// gid_map: the ids the daemon gave the files to.
func checkMapped(pid int, who identity) error {
	for _, m := range []struct {
		file     string
		in, want int
		uidOrGid string
	}{{"uid_map", who.uid, who.hostUID, "uid"}, {"gid_map", who.gid, who.hostGID, "gid"}} {
		got, err := mappedID(fmt.Sprintf("/proc/%d/%s", pid, m.file), m.in)
		if err != nil {
			return berth.WrapError(berth.EUnavailable, err, "docker: cannot read the container's %s", m.file)
		}
		if got != m.want {
			return berth.Errorf(berth.EUnavailable, "docker: the engine runs the container's %s %d as host %s %d, not %d", m.uidOrGid, m.in, m.uidOrGid, got, m.want)
		}
	}
	return nil
}

// mappedID is the host id that id inside maps to by the id map at path
// ("inside outside count" lines); -1 when it maps to none.
func mappedID(path string, id int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var in, out, n int64
		if _, err := fmt.Sscan(sc.Text(), &in, &out, &n); err != nil {
			return 0, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		if int64(id) >= in && int64(id) < in+n {
			return int(out + int64(id) - in), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return -1, nil
}
