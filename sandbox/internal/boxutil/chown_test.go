package boxutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testenv"
)

// ChownTree gives root's entries away but never follows a symbolic link
// out of the tree, never touches a hidden path or a file with another
// link, and leaves other users' files alone.
func TestChownTree(t *testing.T) {
	testenv.NeedRoot(t, "chown needs root")
	const id = 123456
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	testenv.Touch(t, secret)
	testenv.Touch(t, filepath.Join(dir, "sub", "f"))
	testenv.Touch(t, filepath.Join(dir, "hidden", "db"))
	testenv.Touch(t, filepath.Join(dir, "other"))
	if err := os.Chown(filepath.Join(dir, "other"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := ChownTree(dir, id, id, true, []string{filepath.Join(dir, "hidden")}); err != nil {
		t.Fatal(err)
	}
	wantOwners(t, map[string]uint32{
		dir: id, filepath.Join(dir, "sub"): id, filepath.Join(dir, "sub", "f"): id, filepath.Join(dir, "link"): id,
		filepath.Join(dir, "hidden"): 0, filepath.Join(dir, "hidden", "db"): 0,
		filepath.Join(dir, "other"): 4242, secret: 0, outside: 0,
	})
}

// A symbolic link on the path of the directory itself (one a sandbox
// planted where a later session's workspace lies) is refused, not
// followed: the directory it points to keeps its owner (F1).
func TestChownTreeRefusesSymlinkOnPath(t *testing.T) {
	testenv.NeedRoot(t, "chown needs root")
	const id = 123456
	parent, victim := t.TempDir(), t.TempDir()
	testenv.Touch(t, filepath.Join(victim, "passwd"))
	link := filepath.Join(parent, "sub")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{link, filepath.Join(link, ".")} {
		if err := ChownTree(dir, id, id, true, nil); err == nil {
			t.Errorf("ChownTree(%s) followed the link", dir)
		}
	}
	if err := ChownPath(link, link, id, id); err == nil {
		t.Error("ChownPath followed the link")
	}
	for _, p := range []string{victim, filepath.Join(victim, "passwd")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 {
			t.Errorf("%s now belongs to %d", p, st.Uid)
		}
	}
}

// A hidden path is skipped whatever name it is given by: here through a
// symbolic link to the tree, while the walk goes by the real name (F3).
func TestChownTreeHiddenByInode(t *testing.T) {
	testenv.NeedRoot(t, "chown needs root")
	const id = 123456
	base := t.TempDir()
	real := filepath.Join(base, "real")
	testenv.Touch(t, filepath.Join(real, "bhome", "token"))
	testenv.Touch(t, filepath.Join(real, "work", "f"))
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	hidden := []string{filepath.Join(base, "link", "bhome")}
	if err := ChownTree(real, id, id, true, hidden); err != nil {
		t.Fatal(err)
	}
	wantOwners(t, map[string]uint32{
		filepath.Join(real, "work", "f"): id,
		filepath.Join(real, "bhome"):     0, filepath.Join(real, "bhome", "token"): 0,
	})
}

// ChownTree and ChownPath never cross into another mount: a directory of
// the host bound inside the tree (a bind mount, same filesystem) keeps
// its owner and so does everything in it.
func TestChownStaysOnItsMount(t *testing.T) {
	const id = 123456
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "sub", "secret")
	testenv.Touch(t, secret)
	testenv.Touch(t, filepath.Join(dir, "f"))
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.InPrivateMounts(t, func() error {
		if err := unix.Mount(outside, mnt, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		if err := ChownTree(dir, id, id, false, nil); err != nil {
			return err
		}
		if err := ChownPath(dir, filepath.Join(mnt, "sub"), id, id); err != nil {
			return err
		}
		for path, want := range map[string]uint32{
			dir: id, filepath.Join(dir, "f"): id,
			mnt: 0, filepath.Join(mnt, "sub"): 0, filepath.Join(mnt, "sub", "secret"): 0,
		} {
			var st syscall.Stat_t
			if err := syscall.Lstat(path, &st); err != nil {
				return err
			}
			if st.Uid != want {
				t.Errorf("%s belongs to %d, want %d", path, st.Uid, want)
			}
		}
		return nil
	})
}

// ChownPath gives the directories on the way that belong to root and
// stops at a symbolic link, leaving what it points to alone.
func TestChownPathStopsAtALink(t *testing.T) {
	testenv.NeedRoot(t, "chown needs root")
	const id = 123456
	dir, victim := t.TempDir(), t.TempDir()
	testenv.Touch(t, filepath.Join(dir, "a", "b", "f"))
	if err := os.Symlink(victim, filepath.Join(dir, "a", "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "a", "b"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"a/b", "a/l", "a/l/x"} {
		if err := ChownPath(dir, filepath.Join(dir, rel), id, id); err != nil {
			t.Fatal(err)
		}
	}
	wantOwners(t, map[string]uint32{
		dir: id, filepath.Join(dir, "a"): id, filepath.Join(dir, "a", "b"): 4242, victim: 0,
	})
}

// wantOwners checks the owner of each path (not following a link at the
// end of one).
func wantOwners(t *testing.T, owners map[string]uint32) {
	t.Helper()
	for path, want := range owners {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != want {
			t.Errorf("%s belongs to %d, want %d", path, st.Uid, want)
		}
	}
}
