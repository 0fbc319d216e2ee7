package bwrap

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mountKind is what one entry of a sandbox's filesystem is.
type mountKind int

const (
	// roBind binds a host path read-only (--ro-bind, or --ro-bind-try).
	roBind mountKind = iota
	// rwBind binds a host path read-write (--bind).
	rwBind
	// symlink makes a symbolic link (--symlink); src is the link's text.
	symlink
	// tmpfs mounts an empty private tmpfs (--tmpfs).
	tmpfs
	// procfs mounts the sandbox's own /proc (--proc).
	procfs
	// devfs mounts a minimal /dev (--dev).
	devfs
	// dataFile makes a read-only file whose content bwrap reads from the
	// descriptor fd (--ro-bind-data).
	dataFile
	// dir makes an empty directory with mode 0755 (--perms 0755 --dir).
	dir
	// remountRO makes an existing mount read-only (--remount-ro).
	remountRO
)

// mount is one entry of a sandbox's filesystem. bwrap applies them in
// order, a later one hiding whatever an earlier one put under its target.
type mount struct {
	kind mountKind
	src  string
	dst  string
	// try skips a bind whose source is missing instead of failing.
	try bool
	// fd is dataFile's descriptor number in bwrap.
	fd int
	// size caps a tmpfs, in bytes (--size); 0 leaves the kernel's
	// default.
	size int64
	// user marks a bind of the workspace, the home or the caller's
	// binds, which go through the stage when bwrap runs as the host uid.
	user bool
}

// mounts is a sandbox's filesystem in the order bwrap applies it.
type mounts []mount

// args renders the mounts as bwrap arguments.
func (ms mounts) args() []string {
	var a []string
	for _, m := range ms {
		switch m.kind {
		case roBind:
			if m.try {
				a = append(a, "--ro-bind-try", m.src, m.dst)
			} else {
				a = append(a, "--ro-bind", m.src, m.dst)
			}
		case rwBind:
			a = append(a, "--bind", m.src, m.dst)
		case symlink:
			a = append(a, "--symlink", m.src, m.dst)
		case tmpfs:
			if m.size > 0 {
				a = append(a, "--size", strconv.FormatInt(m.size, 10))
			}
			a = append(a, "--tmpfs", m.dst)
		case procfs:
			a = append(a, "--proc", m.dst)
		case devfs:
			a = append(a, "--dev", m.dst)
		case dataFile:
			a = append(a, "--ro-bind-data", strconv.Itoa(m.fd), m.dst)
		case dir:
			a = append(a, "--perms", "0755", "--dir", m.dst)
		case remountRO:
			a = append(a, "--remount-ro", m.dst)
		}
	}
	return a
}

// systemMounts are the host's system directories, read-only, as the host
// has them: a directory is bound, a symbolic link (merged /usr) is
// recreated. Missing ones are left out. Then /etc: through the view in
// etcView when there is one (see etcview.go).
func systemMounts(etcView string) mounts {
	return append(systemDirMounts(), etcMounts(etcView)...)
}

// systemDirMounts are systemMounts' system directories, without /etc.
func systemDirMounts() mounts {
	var ms mounts
	for _, p := range systemDirs {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				ms = append(ms, mount{kind: symlink, src: target, dst: p})
			}
		case fi.IsDir():
			ms = append(ms, mount{kind: roBind, src: p, dst: p})
		}
	}
	return ms
}

// systemDirs are bound read-only when the host has them.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// etcEntries are the parts of the host's /etc a sandbox sees: what
// programs need to resolve names, load libraries, check certificates and
// tell the time. Everything else of /etc (shadow, gshadow, ssh host keys,
// ssl/private, sudoers, credentials of system services) is absent. passwd
// and group are not the host's but made per sandbox.
var etcEntries = []string{
	"alternatives",
	"bash.bashrc",
	"ca-certificates",
	"ca-certificates.conf",
	"debian_version",
	"gai.conf",
	"host.conf",
	"hosts",
	"inputrc",
	"ld.so.cache",
	"ld.so.conf",
	"ld.so.conf.d",
	"localtime",
	"mime.types",
	"nsswitch.conf",
	"os-release",
	"profile",
	"protocols",
	"resolv.conf",
	"services",
	"shells",
	"ssl/certs",
	"ssl/openssl.cnf",
	"timezone",
}

// userMounts orders the workspace, the home and the caller's binds so that
// a bind inside another comes after it (bwrap would hide it otherwise).
// Among binds at the same depth the caller's order is kept.
func userMounts(ms mounts) mounts {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b mount) int {
		return depth(a.dst) - depth(b.dst)
	})
	return out
}

// depth is the number of components of an absolute clean path.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// within reports whether p is dir or lies under it; both are clean and
// absolute.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// resolve maps p, an absolute path inside the sandbox, to where it lives
// on the host. host is "" when p is not backed by the host: under a tmpfs,
// /proc, /dev, a made file or bwrap's own root. exists then says whether p
// is there anyway (a mount point or a directory bwrap made on the way to
// one). Symbolic links that bwrap made are followed; the host's own are
// not (the caller stats the host path).
func (ms mounts) resolve(p string) (host string, exists bool) {
	p = filepath.Clean(p)
	for hops := 0; hops < 16; hops++ {
		i := len(ms) - 1
		for i >= 0 && (ms[i].kind == remountRO || !within(p, ms[i].dst)) {
			i--
		}
		if i < 0 {
			// bwrap's own root: only the directories it made to reach
			// a mount point are there.
			return "", p == "/" || slices.ContainsFunc(ms, func(m mount) bool { return within(m.dst, p) })
		}
		m := ms[i]
		rest := strings.TrimPrefix(strings.TrimPrefix(p, m.dst), "/")
		switch m.kind {
		case roBind, rwBind:
			return filepath.Join(m.src, rest), true
		case symlink:
			target := m.src
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(m.dst), target)
			}
			p = filepath.Join(target, rest)
			continue
		default:
			// A mount point, or a directory bwrap made in it on the
			// way to a later mount point.
			return "", rest == "" || slices.ContainsFunc(ms[i+1:], func(m mount) bool { return within(m.dst, p) })
		}
	}
	return "", false
}
