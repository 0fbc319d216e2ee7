package docker

import (
	"bufio"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The helper is the host's statically linked busybox. Bound at HelperPath
// in every container, it is the container's init (a sleeping shell that
// reaps orphans) and its `kill` when a signal must be sent from inside; it
// is also the whole userland of the default image. Being static, it runs
// in any image, distroless ones included.

// helperCandidates are where Debian's busybox-static installs busybox.
var helperCandidates = []string{"/usr/bin/busybox", "/bin/busybox"}

// fallbackApplets are linked into the default image when the helper
// cannot list its own applets.
var fallbackApplets = []string{
	"sh", "ash", "cat", "chmod", "cp", "echo", "env", "false", "grep", "head",
	"id", "kill", "ls", "mkdir", "mv", "ps", "pwd", "rm", "sed", "sleep",
	"tail", "test", "touch", "true", "wc",
}

// findHelper returns the real path of a static busybox: want when set,
// else the first of helperCandidates; "" when there is none.
func findHelper(want string) string {
	cands := helperCandidates
	if want != "" {
		cands = []string{want}
	}
	for _, c := range cands {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		if isStatic(real) {
			return real
		}
	}
	return ""
}

// isStatic reports whether path is an ELF executable with no program
// interpreter, i.e. one that runs without the host's shared libraries.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return false
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// applets lists the helper's applets (`busybox --list`), or
// fallbackApplets when it cannot say.
func applets(helper string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, helper, "--list").Output()
	if err != nil {
		return fallbackApplets
	}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || name == "busybox" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return fallbackApplets
	}
	return names
}
