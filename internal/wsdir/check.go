package wsdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
)

// MaxScan bounds the entries Check looks at for their owners.
const MaxScan = 10000

// maxAncestors bounds the directories Check climbs above a workspace (a
// path of PATH_MAX has fewer).
const maxAncestors = 2048

// Check refuses, with a 400 invalid_argument naming field, the directory
// dir holds open (name is its absolute path with its links resolved, as
// the session stores it) when it is not one user's project but a
// directory people share:
//
//   - sticky or writable by every user (/tmp, /var/tmp, any such one);
//   - a system or shared directory by its name (/, /usr, /etc, /home,
//     /mnt, /media, /srv, /tmp, ...) or one above one, or one inside
//     /dev, /proc, /run or /sys; under a root daemon also one inside a
//     system directory, or a user's home directory or one above one
//     (systemName);
//   - the root of a filesystem: a mount point, bind mounts included;
//   - below a directory every user may write that is not sticky (anyone
//     could put another directory in its place);
//   - holding files of two or more users other than root, the daemon's
//     user and own (berth's own: its sandboxes' host uids), among the
//     first MaxScan entries of a breadth-first Walk from it.
//
// Every test but the name's is made on dir itself, not on the path: what
// is checked is the directory the caller holds and goes on to use,
// whatever the path leads to by then.
func Check(dir *os.File, name, field string, own []int) error {
	return check(dir, name, field, own, os.Geteuid())
}

// check is Check for a daemon whose user is self.
func check(dir *os.File, name, field string, own []int, self int) error {
	refuse := func(why string) error {
		return &core.Error{Code: core.EInvalid, Message: fmt.Sprintf("%s %s refused: %s", field, name, why),
			Details: map[string]any{"field": field}}
	}
	if why := systemName(filepath.Clean(name), self == 0); why != "" {
		return refuse(why)
	}
	fd := int(dir.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return core.WrapError(core.EInvalid, err, "%s %s cannot be read", field, name)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refuse("it is not a directory")
	}
	if st.Mode&(unix.S_ISVTX|0o002) != 0 {
		return refuse("it is sticky or every user may write it, a directory people share (such as /tmp); pick a project directory of your own")
	}
	root, err := mountRoot(fd)
	if err != nil {
		return core.WrapError(core.EInvalid, err, "%s %s cannot be read", field, name)
	}
	if root {
		return refuse("it is the root of a filesystem (a mount point, such as a disk under /mnt or /media); pick a project directory inside it")
	}
	open, err := openAncestor(fd)
	if err != nil {
		return core.WrapError(core.EInvalid, err, "%s %s: its parent directories cannot be read", field, name)
	}
	if open {
		return refuse("a directory above it is writable by every user and not sticky: anyone could put another directory in its place; pick a project directory whose parents are not")
	}
	others, err := otherOwners(dir, append(slices.Clone(own), 0, self), MaxScan)
	if err != nil {
		return core.WrapError(core.EInvalid, err, "%s %s cannot be read", field, name)
	}
	if len(others) >= 2 {
		return refuse(fmt.Sprintf("it holds files of several other users (uids %d and %d among them), a directory people share; pick a project directory of your own", others[0], others[1]))
	}
	return nil
}

// mountRoot reports whether the directory fd holds is the root of a
// mounted filesystem (bind mounts included): as statx says, or, on a
// kernel that does not say, when its parent is on another device or mount
// or is itself (/).
func mountRoot(fd int) (bool, error) {
	var self unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &self); err != nil {
		return false, err
	}
	if self.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return self.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	return mountRootByParent(fd)
}

// mountRootByParent is mountRoot on a kernel whose statx does not say:
// the directory fd holds is a mount's root when its parent is on another
// device or mount, or is itself (/).
func mountRootByParent(fd int) (bool, error) {
	const mask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID
	var self, parent unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, mask, &self); err != nil {
		return false, err
	}
	if err := unix.Statx(fd, "..", unix.AT_SYMLINK_NOFOLLOW, mask, &parent); err != nil {
		return false, err
	}
	sameDev := self.Dev_major == parent.Dev_major && self.Dev_minor == parent.Dev_minor
	if !sameDev || self.Ino == parent.Ino {
		return true, nil
	}
	return self.Mask&parent.Mask&unix.STATX_MNT_ID != 0 && self.Mnt_id != parent.Mnt_id, nil
}

// openAncestor reports whether a directory above the one fd holds (up to
// /, across mounts) may be written by every user and is not sticky.
func openAncestor(fd int) (bool, error) {
	var prev unix.Stat_t
	if err := unix.Fstat(fd, &prev); err != nil {
		return false, err
	}
	cur := fd
	defer func() {
		if cur != fd {
			_ = unix.Close(cur)
		}
	}()
	for range maxAncestors {
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		if cur != fd {
			_ = unix.Close(cur)
		}
		cur = up
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		if st.Dev == prev.Dev && st.Ino == prev.Ino {
			return false, nil
		}
		if st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return true, nil
		}
		prev = st
	}
	return false, errors.New("too many directories above it")
}

// otherOwners lists, in the order met, the owners of the entries of dir's
// tree that are not among known, stopping at the second or after limit
// entries (Walk).
func otherOwners(dir *os.File, known []int, limit int) ([]int, error) {
	var others []int
	errEnough := errors.New("two found")
	err := Walk(dir, limit, func(e *Entry) error {
		uid := int(e.Stat.Uid)
		if slices.Contains(known, uid) || slices.Contains(others, uid) {
			return nil
		}
		if others = append(others, uid); len(others) == 2 {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return others, nil
}
