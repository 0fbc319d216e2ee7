package wsdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// mkdir makes dir with exactly mode (the umask aside) and returns it.
func mkdir(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPath opens dir as the daemon does and checks it for a daemon whose
// user is self.
func checkPath(t *testing.T, dir string, own []int, self int) error {
	t.Helper()
	f, err := OpenNoFollow(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return check(f, dir, "workspace", own, self)
}

// wantRefused checks err is a 400 naming the workspace field, whose
// message names the directory and says why (want).
func wantRefused(t *testing.T, dir string, err error, want string) {
	t.Helper()
	var be *berth.Error
	if !errors.As(err, &be) || be.Code != berth.EInvalid || be.Details["field"] != "workspace" {
		t.Errorf("%s: %v, want invalid_argument on the workspace field", dir, err)
		return
	}
	if !strings.Contains(be.Message, "workspace "+dir+" refused") || !strings.Contains(be.Message, want) {
		t.Errorf("%s: message %q, want it to name the workspace and say %q", dir, be.Message, want)
	}
}

// Sticky and world-writable directories, and those below a world-writable
// directory that is not sticky, are refused for a root daemon and any
// other alike; a directory of one's own is not, below a sticky one (/tmp)
// included.
func TestCheckRefusesWhatEveryoneMayWrite(t *testing.T) {
	base := t.TempDir()
	open := mkdir(t, filepath.Join(base, "open"), 0o777)
	sticky := mkdir(t, filepath.Join(base, "sticky"), 0o777|os.ModeSticky)
	const mayWrite, above = "sticky or every user may write it", "a directory above it is writable by every user and not sticky"
	for dir, why := range map[string]string{
		mkdir(t, filepath.Join(base, "stickybit"), 0o755|os.ModeSticky): mayWrite,
		sticky: mayWrite,
		open:   mayWrite,
		mkdir(t, filepath.Join(open, "project"), 0o755):           above,
		mkdir(t, filepath.Join(open, "project", "deeper"), 0o700): above,
		mkdir(t, filepath.Join(sticky, "project"), 0o755):         "",
		mkdir(t, filepath.Join(base, "own"), 0o755):               "",
		mkdir(t, filepath.Join(base, "groupwritable"), 0o775):     "",
	} {
		for _, self := range []int{os.Geteuid(), 4242} {
			err := checkPath(t, dir, nil, self)
			if why == "" {
				if err != nil {
					t.Errorf("%s (daemon uid %d): %v", dir, self, err)
				}
				continue
			}
			wantRefused(t, dir, err, why)
		}
	}
}

// The host's shared and system directories are refused by name, under a
// root daemon and any other alike.
func TestCheckRefusesSystemAndSharedDirectories(t *testing.T) {
	for _, dir := range []string{"/", "/tmp", "/var/tmp", "/mnt", "/media", "/srv", "/home", "/usr", "/etc", "/var", "/opt", "/proc/self", "/dev/shm", "/sys/kernel"} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, self := range []int{0, 4242} {
			wantRefused(t, real, checkPath(t, real, nil, self), "refused: ")
		}
	}
}

// The root of a filesystem is refused: / and /proc, whatever the kernel
// says of them, and a bind mount of a directory of the same filesystem.
func TestCheckRefusesMountPoints(t *testing.T) {
	for _, dir := range []string{"/", "/proc"} {
		f, err := OpenNoFollow(dir)
		if err != nil {
			t.Fatal(err)
		}
		byAttr, err := mountRoot(int(f.Fd()))
		if err != nil || !byAttr {
			t.Errorf("mountRoot(%s) = %v, %v", dir, byAttr, err)
		}
		byParent, err := mountRootByParent(int(f.Fd()))
		if err != nil || !byParent {
			t.Errorf("mountRootByParent(%s) = %v, %v", dir, byParent, err)
		}
		f.Close()
	}
	plain, err := OpenNoFollow(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if root, err := mountRoot(int(plain.Fd())); err != nil || root {
		t.Errorf("mountRoot(a temporary directory) = %v, %v", root, err)
	}
	if root, err := mountRootByParent(int(plain.Fd())); err != nil || root {
		t.Errorf("mountRootByParent(a temporary directory) = %v, %v", root, err)
	}

	base := t.TempDir()
	src, mnt := mkdir(t, filepath.Join(base, "src"), 0o755), mkdir(t, filepath.Join(base, "mnt"), 0o755)
	testenv.InPrivateMounts(t, func() error {
		if err := unix.Mount(src, mnt, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		for _, self := range []int{0, 4242} {
			f, err := OpenNoFollow(mnt)
			if err != nil {
				return err
			}
			err = check(f, mnt, "workspace", nil, self)
			byParent, perr := mountRootByParent(int(f.Fd()))
			f.Close()
			if perr != nil || !byParent {
				t.Errorf("mountRootByParent(a bind mount) = %v, %v", byParent, perr)
			}
			wantRefused(t, mnt, err, "the root of a filesystem")
		}
		return nil
	})
}

// A tree holding files of two users other than root, the daemon's user
// and berth's own sandbox uids is refused; one other user's files, or a
// second user's that are berth's own, are not.
func TestCheckRefusesSeveralOtherUsers(t *testing.T) {
	testenv.NeedRoot(t, "files of other users are made with chown")
	chown := func(p string, uid int) {
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	// A shared directory as found: one user's project beside another's,
	// each with its files.
	shared := t.TempDir()
	for name, uid := range map[string]int{"alice": 4343, "bob": 4444} {
		dir := mkdir(t, filepath.Join(shared, name), 0o755)
		f := filepath.Join(dir, "notes")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		chown(dir, uid)
		chown(f, uid)
	}
	// One user's project, with files of root's and of berth's sandbox uid.
	project := t.TempDir()
	chown(project, 4343)
	for name, uid := range map[string]int{"a": 4343, "b": 0, "c": 99999} {
		if err := os.WriteFile(filepath.Join(project, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		chown(filepath.Join(project, name), uid)
	}
	// The same with files of a second user deep down.
	deep := t.TempDir()
	chown(deep, 4343)
	leaf := mkdir(t, filepath.Join(deep, "a", "b", "c"), 0o755)
	if err := os.WriteFile(filepath.Join(leaf, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	chown(filepath.Join(leaf, "f"), 4444)

	for _, self := range []int{0, 4242} {
		wantRefused(t, shared, checkPath(t, shared, nil, self), "several other users")
		wantRefused(t, deep, checkPath(t, deep, nil, self), "several other users")
		if err := checkPath(t, deep, []int{4444}, self); err != nil {
			t.Errorf("a second user that is berth's own (daemon uid %d): %v", self, err)
		}
		if err := checkPath(t, project, []int{99999}, self); err != nil {
			t.Errorf("one user's project (daemon uid %d): %v", self, err)
		}
		wantRefused(t, project, checkPath(t, project, nil, self), "several other users (uids 4343 and 99999 among them)")
	}
	// The daemon's user's own files are not another user's.
	if err := checkPath(t, shared, nil, 4444); err != nil {
		t.Errorf("files of the daemon's user counted as another's: %v", err)
	}
}

// A walk stops after its bound, and so does the owner scan: files past it
// are not looked at.
func TestScanIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenNoFollow(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for limit, want := range map[int]int{1: 1, 3: 3, 4: 4, 0: 4} {
		seen := 0
		if err := Walk(f, limit, func(*Entry) error { seen++; return nil }); err != nil {
			t.Fatal(err)
		}
		if seen != want {
			t.Errorf("Walk with limit %d saw %d entries, want %d", limit, seen, want)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	// Breadth first: a second user's file two levels down is met after
	// the first level's entries, so a bound of top and first level (1+4)
	// does not see it.
	leaf := mkdir(t, filepath.Join(dir, "d", "e"), 0o755)
	if err := os.WriteFile(filepath.Join(leaf, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, uid := range map[string]int{dir: 4343, filepath.Join(leaf, "f"): 4444} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	for limit, want := range map[int]int{5: 1, 0: 2} {
		if others, err := otherOwners(f, []int{0}, limit); err != nil || len(others) != want {
			t.Errorf("otherOwners within %d entries = %v, %v; want %d", limit, others, err, want)
		}
	}
}

// BenchmarkCheck checks a project of 20,000 files in 200 directories:
// the owner scan stops at MaxScan entries.
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	testenv.FillTree(b, dir, 200, 100)
	f, err := OpenNoFollow(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := Check(f, dir, "workspace", nil); err != nil {
			b.Fatal(err)
		}
	}
}
