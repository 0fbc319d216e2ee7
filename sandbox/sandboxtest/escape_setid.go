package sandboxtest

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// setIDPlants are the files the set-id case tries to leave with a set-id
// bit, each by another way.
var setIDPlants = []string{"chmod4755", "chmod2755", "chmodus", "chmodgs", "install4755", "tarsuid", "mknod4755"}

// testSetIDPlant: no file the agent writes keeps a set-id bit (a
// set-user-id copy of a shell left in the workspace would run with its
// host owner's rights for any local user), however it sets the mode:
// chmod, chmod u+s / g+s, install -m, a tar member, mknod -m. Checked from
// the host. Under a root daemon, none of the files it made belongs to a
// uid or gid under 1000 on the host. The control: a plain chmod 755
// works.
func testSetIDPlant(t *testing.T, s *suite) {
	if s.opts.NoSetIDFilter {
		t.Skip("the provider does not refuse set-id bits (Options.NoSetIDFilter)")
	}
	b := s.newBox(t, nil)
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	body := []byte("#!/bin/sh\nid\n")
	if err := tw.WriteHeader(&tar.Header{Name: "tarsuid", Mode: 0o4755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.cfg.Workspace, "suid.tar"), archive.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runEscape(t, b, `cp $BB ./chmod4755; chmod 4755 ./chmod4755
cp $BB ./chmod2755; chmod 2755 ./chmod2755
cp $BB ./chmodus; chmod u+s ./chmodus
cp $BB ./chmodgs; chmod g+s ./chmodgs
$BB install -m 4755 $BB ./install4755
$BB tar -xpf suid.tar
$BB mknod -m 4755 ./mknod4755 p
cp $BB ./plain && chmod 755 ./plain
echo written > ./written.txt
mkdir ./madedir`)
	found := 0
	for _, name := range setIDPlants {
		fi, err := os.Lstat(filepath.Join(b.cfg.Workspace, name))
		if err != nil {
			continue
		}
		found++
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			st := fi.Sys().(*syscall.Stat_t)
			t.Errorf("%s: the sandbox left a set-id file on the host: %v, owner uid %d", name, fi.Mode(), st.Uid)
		}
	}
	// Under a root daemon, nothing the sandbox made belongs to root or
	// another system user on the host (a sandbox uid mapped to root's
	// would hand it root's files).
	if os.Geteuid() == 0 {
		for _, name := range append([]string{"plain", "written.txt", "madedir"}, setIDPlants...) {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(b.cfg.Workspace, name), &st); err != nil {
				if name == "plain" || name == "written.txt" || name == "madedir" {
					t.Errorf("%s was not made: %v", name, err)
				}
				continue
			}
			if st.Uid < 1000 || st.Gid < 1000 {
				t.Errorf("%s: the sandbox's file belongs to the host's uid %d, gid %d (a privileged user)", name, st.Uid, st.Gid)
			}
		}
	}
	fi, err := os.Stat(filepath.Join(b.cfg.Workspace, "plain"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the control chmod 755 did not land (%v, %v): the check proves nothing", fi, err)
	}
	if found == 0 {
		t.Errorf("none of %s was written: the check proves nothing", strings.Join(setIDPlants, ", "))
	}
}
