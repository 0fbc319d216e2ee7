package wsdir

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testenv"
)

// walked lists the Rel of every entry a walk of dir meets.
func walked(dir string) ([]string, error) {
	f, err := OpenNoFollow(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	err = Walk(f, 0, func(e *Entry) error {
		out = append(out, e.Rel)
		return nil
	})
	slices.Sort(out)
	return out, err
}

// A walk meets a symbolic link as itself and never goes through it, and
// SkipDir keeps it out of a directory.
func TestWalkFollowsNoLink(t *testing.T) {
	top, outside := t.TempDir(), t.TempDir()
	testenv.Touch(t, filepath.Join(top, "a", "f"))
	testenv.Touch(t, filepath.Join(top, "skipped", "g"))
	testenv.Touch(t, filepath.Join(outside, "secret"))
	for name, target := range map[string]string{"link": outside, "up": "..", "flink": filepath.Join(outside, "secret")} {
		if err := os.Symlink(target, filepath.Join(top, name)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenNoFollow(top)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	err = Walk(f, 0, func(e *Entry) error {
		got = append(got, e.Rel)
		if e.Rel == "skipped" {
			return SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{".", "a", "a/f", "flink", "link", "skipped", "up"}
	if !slices.Equal(got, want) {
		t.Errorf("walked %v, want %v", got, want)
	}
}

// A walk does not enter a mount point inside its tree, a bind mount of
// the same filesystem included.
func TestWalkStaysOnItsMount(t *testing.T) {
	top, outside := t.TempDir(), t.TempDir()
	testenv.Touch(t, filepath.Join(top, "a", "f"))
	testenv.Touch(t, filepath.Join(outside, "secret"))
	mnt := filepath.Join(top, "a", "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.InPrivateMounts(t, func() error {
		if err := unix.Mount(outside, mnt, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		got, err := walked(top)
		if err != nil {
			return err
		}
		if slices.Contains(got, "a/mnt/secret") || !slices.Contains(got, "a/f") {
			t.Errorf("walked %v: went into the mount, or missed a/f", got)
		}
		return nil
	})
}

// Entry.Chown leaves alone an entry swapped since the walk met it: the
// symbolic link put in its place and what the link points to keep their
// owners.
func TestEntryChownLeavesASwappedEntry(t *testing.T) {
	testenv.NeedRoot(t, "chown needs root")
	top, outside := t.TempDir(), t.TempDir()
	testenv.Touch(t, filepath.Join(top, "f"))
	secret := filepath.Join(outside, "secret")
	testenv.Touch(t, secret)
	f, err := OpenNoFollow(top)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = Walk(f, 0, func(e *Entry) error {
		if e.Rel != "f" {
			return nil
		}
		// What a sandbox could do between the walk's look and the chown.
		if err := os.Rename(filepath.Join(top, "f"), filepath.Join(top, "old")); err != nil {
			return err
		}
		if err := os.Symlink(secret, filepath.Join(top, "f")); err != nil {
			return err
		}
		return e.Chown(4242, 4242, func(*unix.Stat_t) bool { return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secret, filepath.Join(top, "f"), filepath.Join(top, "old")} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 {
			t.Errorf("%s now belongs to %d", p, st.Uid)
		}
	}
}
