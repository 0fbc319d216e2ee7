package main

import (
	"runtime/debug"
	"strings"
	"sync"
)

// version is set at build time with -ldflags "-X main.version=…"; when it
// is not, versionString falls back to what Go recorded in the binary.
var version = "dev"

// versionString is what `berth --version` prints and the daemon reports:
// the version set at build time, else the module's version (a `go install
// …@v1.2.3`), else the VCS revision the binary was built from, with
// "+dirty" when the tree had uncommitted changes. Worked out once: the
// build information is parsed anew at each debug.ReadBuildInfo (a few
// hundred modules' lines), and a daemon's start asks three times.
var versionString = sync.OnceValue(buildVersion)

// buildVersion works versionString out.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		// go run, or a build outside a repository, records neither.
		return version + " (" + strings.TrimPrefix(info.GoVersion, "go") + ", no version or revision recorded in this build)"
	}
	return "dev-" + rev[:min(12, len(rev))] + dirty + " (" + strings.TrimPrefix(info.GoVersion, "go") + ")"
}
