package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// imageOf is a shim image of prog.
func imageOf(prog []byte) shimImage {
	return shimImage{sum: sha256.Sum256(prog), fsys: fstest.MapFS{"shim": {Data: prog}}, name: "shim"}
}

// newPrivateHome is a home as a daemon has it: a 0700 directory.
func newPrivateHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

// wantInstalled checks that path is prog, a regular file of ours, 0700.
func wantInstalled(t *testing.T, path string, prog []byte) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Fatalf("%s is %s, uid %d", path, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, prog) {
		t.Fatalf("%s does not hold the shim", path)
	}
	return fi
}

// The shim is written once, named by its hash, and used as it is while
// it is intact.
func TestInstallShimWritesOnceByHash(t *testing.T) {
	home := newPrivateHome(t)
	prog := []byte("#!/bin/sh\necho shim\n")
	path, err := installShim(home, imageOf(prog))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(prog)
	if want := filepath.Join(home, "bin", "berth-shim-"+hex.EncodeToString(sum[:])[:16]); path != want {
		t.Fatalf("path %s, want %s", path, want)
	}
	first := wantInstalled(t, path, prog)
	if fi, _ := os.Stat(filepath.Join(home, "bin")); fi.Mode().Perm() != 0o700 {
		t.Fatalf("bin is %s", fi.Mode())
	}
	again, err := installShim(home, imageOf(prog))
	if err != nil || again != path {
		t.Fatalf("again: %s, %v", again, err)
	}
	if !os.SameFile(first, wantInstalled(t, path, prog)) {
		t.Fatal("an intact shim was written again")
	}
}

// Whatever else is found at the shim's path — a file with other content,
// other modes, another owner, or a symlink — is replaced, and a symlink's
// target is neither written nor left in place of the shim.
func TestInstallShimReplacesWhatIsNotItself(t *testing.T) {
	prog := []byte("#!/bin/sh\necho shim\n")
	cases := map[string]func(t *testing.T, path string){
		"tampered": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\necho evil\n"), 0o700); err != nil {
				t.Fatal(err)
			}
		},
		"same bytes, writable by others": func(t *testing.T, path string) {
			if err := os.WriteFile(path, prog, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"same bytes, another owner": func(t *testing.T, path string) {
			testenv.NeedRoot(t, "only root can make a file of another owner")
			if err := os.WriteFile(path, prog, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		},
		"symlink to the same bytes": func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, prog, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			home := newPrivateHome(t)
			path, err := installShim(home, imageOf(prog))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			plant(t, path)
			var target string
			if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink != 0 {
				target, _ = os.Readlink(path)
			}
			got, err := installShim(home, imageOf(prog))
			if err != nil || got != path {
				t.Fatalf("install: %s, %v", got, err)
			}
			wantInstalled(t, path, prog)
			if target != "" {
				if b, _ := os.ReadFile(target); !bytes.Equal(b, prog) {
					t.Fatal("the symlink's target was written")
				}
			}
		})
	}
}

// A bin directory that is a symlink, or that others can enter, is
// refused: the daemon then runs `berth shim`.
func TestInstallShimRefusesAnUnsafeDirectory(t *testing.T) {
	prog := []byte("shim")
	t.Run("symlink", func(t *testing.T) {
		home := newPrivateHome(t)
		elsewhere := t.TempDir()
		if err := os.Chmod(elsewhere, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(home, "bin")); err != nil {
			t.Fatal(err)
		}
		if _, err := installShim(home, imageOf(prog)); !berth.IsCode(err, berth.EForbidden) {
			t.Fatalf("err %v", err)
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Fatalf("wrote through the symlink: %v", ents)
		}
	})
	t.Run("open to others", func(t *testing.T) {
		home := newPrivateHome(t)
		if err := os.Mkdir(filepath.Join(home, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(home, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := installShim(home, imageOf(prog)); !berth.IsCode(err, berth.EForbidden) {
			t.Fatalf("err %v", err)
		}
	})
}

// A home on a noexec filesystem gets no small shim (it could not run):
// the daemon then runs `berth shim`.
func TestInstallShimRefusesANoexecHome(t *testing.T) {
	testenv.NeedRoot(t, "mounting a noexec tmpfs")
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_NOEXEC, "size=16m"); err != nil {
		testenv.Missing(t, "a tmpfs mount", "cannot mount a noexec tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, 0) })
	home := filepath.Join(mnt, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := installShim(home, imageOf([]byte("shim"))); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("err %v", err)
	}
	if got := installedShims(home); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
}

// Bytes that do not have the image's hash are not installed.
func TestInstallShimChecksTheBytesItWrites(t *testing.T) {
	home := newPrivateHome(t)
	img := imageOf([]byte("the shim"))
	img.fsys = fstest.MapFS{"shim": {Data: []byte("another program")}}
	path, err := installShim(home, img)
	if !berth.IsCode(err, berth.EInternal) {
		t.Fatalf("err %v", err)
	}
	if got := installedShims(home); len(got) != 0 {
		t.Fatalf("left %v (path %s)", got, path)
	}
}

// Shims of other versions go at start unless a live process runs one;
// the current one stays.
func TestRemoveOldShimsKeepsTheRunningOnes(t *testing.T) {
	home := newPrivateHome(t)
	cur, err := installShim(home, imageOf([]byte("current")))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(cur)
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		testenv.Missing(t, "/bin/sleep", "no /bin/sleep to run as an old shim")
	}
	running := filepath.Join(dir, "berth-shim-0000000000000001")
	idle := filepath.Join(dir, "berth-shim-0000000000000002")
	partial := filepath.Join(dir, ".berth-shim-123")
	other := filepath.Join(dir, "not-a-shim")
	for _, f := range []string{running, idle, partial, other} {
		if err := os.WriteFile(f, sleep, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(running, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The exe link names the file once the exec is done.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "exe")); exe == running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old shim does not run")
		}
	}
	if n := removeOldShims(home, cur); n != 2 {
		t.Errorf("removed %d, want 2", n)
	}
	for f, want := range map[string]bool{cur: true, running: true, other: true, idle: false, partial: false} {
		if _, err := os.Lstat(f); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(f), err == nil, want)
		}
	}
}
