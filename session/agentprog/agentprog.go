// Package agentprog finds what an agent's command needs from the host to
// run inside an isolating sandbox: the path to run and the host paths to
// bind read-only (an npm prefix in the user's home, an nvm node).
package agentprog

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
)

// Program is how an agent's command is started inside an isolating
// sandbox: the path to run and the host paths it needs bound read-only.
type Program struct {
	Path  string
	Binds []berth.Bind
}

// Resolve finds what the agent's command needs from the host
// when it lives outside the system directories (an npm prefix in the
// user's home, an nvm node), given the PATH the agent gets:
//
//   - a program inside a node_modules tree (what npm installs, globally or
//     into a prefix) runs from its real path, with its package bound
//     read-only; and the whole outermost node_modules too when that is a
//     project's (a package.json beside it: npm hoists the dependencies
//     there), never a directory above it;
//   - any other program is bound alone, as before;
//   - a script's interpreter (`#!/usr/bin/env node`) found outside the
//     system directories is bound where the PATH finds it.
//
// A bare name is looked up in PATH unless bare is false (docker: the name
// is the image's). What would hold the user's home, or be the root, is
// never bound: the program file alone is.
func Resolve(command, pathList string, bare bool, userHome string) Program {
	p := Program{Path: command}
	host := command
	if !strings.Contains(command, "/") {
		if !bare {
			return p
		}
		if host = lookPath(command, pathList); host == "" {
			return p
		}
	}
	if !OutsideSystemDirs(host) {
		return p
	}
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		// Missing: the sandbox says it is not found.
		return p
	}
	pkg, tree := packageDirs(real)
	switch {
	case pkg != "" && safeToBind(pkg, userHome):
		p.Path = real
		p.Binds = append(p.Binds, berth.Bind{Source: pkg, Target: pkg})
		if tree != "" && safeToBind(tree, userHome) {
			p.Binds = append(p.Binds, berth.Bind{Source: tree, Target: tree})
		}
	default:
		p.Path = host
		p.Binds = append(p.Binds, berth.Bind{Source: real, Target: host})
	}
	if interp := interpreter(real, pathList); interp != "" && OutsideSystemDirs(interp) {
		if r, err := filepath.EvalSymlinks(interp); err == nil {
			p.Binds = append(p.Binds, berth.Bind{Source: r, Target: interp})
		}
	}
	return p
}

// lookPath finds an executable file named name in the directories of
// pathList, as the sandbox's own lookup does; "" when none.
func lookPath(name, pathList string) string {
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// packageDirs returns, for a real file path inside a node_modules tree,
// its package's directory (the one below the outermost node_modules, two
// below for an @scope) and, when the directory holding that node_modules
// is a project (has a package.json: a local or npx install, whose
// dependencies npm hoists beside the package), the node_modules itself.
func packageDirs(real string) (pkg, tree string) {
	parts := strings.Split(filepath.Clean(real), string(filepath.Separator))
	at := -1
	for i, part := range parts[:len(parts)-1] {
		if part == "node_modules" {
			at = i
			break
		}
	}
	if at < 0 || at+2 >= len(parts) {
		return "", ""
	}
	end := at + 2
	if strings.HasPrefix(parts[at+1], "@") {
		end++
		if end >= len(parts) {
			return "", ""
		}
	}
	sep := string(filepath.Separator)
	pkg = filepath.Clean(sep + filepath.Join(parts[:end]...))
	nm := filepath.Clean(sep + filepath.Join(parts[:at+1]...))
	if _, err := os.Stat(filepath.Join(filepath.Dir(nm), "package.json")); err == nil {
		tree = nm
	}
	return pkg, tree
}

// safeToBind reports whether dir may be bound whole into a sandbox: not
// the root, not a system directory (visible already), and neither the
// user's home nor a directory above it.
func safeToBind(dir, userHome string) bool {
	dir = filepath.Clean(dir)
	if dir == "/" || !OutsideSystemDirs(dir+"/") {
		return false
	}
	if userHome != "" {
		home := filepath.Clean(userHome)
		if home == dir || strings.HasPrefix(home+"/", dir+"/") {
			return false
		}
	}
	return true
}

// interpreter returns the program a script's "#!" line runs, found in
// pathList for `#!/usr/bin/env NAME`; "" for a binary or none found.
func interpreter(script, pathList string) string {
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 256).ReadSlice('\n')
	if !bytes.HasPrefix(line, []byte("#!")) || (err != nil && len(line) == 0) {
		return ""
	}
	fields := strings.Fields(string(line[2:]))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	// env's options (-S splits the rest) come before the program's name.
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			continue
		}
		return lookPath(f, pathList)
	}
	return ""
}

// systemDirs are visible inside every isolating sandbox already.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}

// OutsideSystemDirs reports whether the absolute path p lies outside the
// system directories (and so must be bound to be seen in a sandbox).
func OutsideSystemDirs(p string) bool {
	return filepath.IsAbs(p) && !slices.ContainsFunc(systemDirs, func(d string) bool { return strings.HasPrefix(p, d) })
}
