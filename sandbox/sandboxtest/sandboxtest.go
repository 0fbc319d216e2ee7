// Package sandboxtest is the conformance suite every sandbox provider
// runs: one call to Run from the provider's tests.
//
// The functional cases hold for every provider: a process starts in the
// workspace (or ProcSpec.Dir), gets its pipes or the caller's streams, the
// environment it is given and a HOME that is the sandbox's, reports its
// exit code or the signal that killed it, and Stop ends its whole group
// and reaps it. The escape cases, for providers that isolate, each try to
// get out of the sandbox and check from the host that nothing got out:
// host secrets, the daemon's files, environment and loopback services,
// another session's workspace, writes outside the workspace and HOME,
// processes that outlive the sandbox, a fork loop, a process that
// allocates past the memory limit, a /tmp filled past its cap.
//
// Scripts run with a static busybox (Debian's busybox-static, at
// /bin/busybox on the host), so that they behave the same in every
// provider whatever its image: isolating providers get it bound into every
// sandbox at BusyboxPath. The suite fails at once when it is missing.
//
// Every sandbox the suite opens carries a unique marker in its
// environment (MarkerVar); after each case the suite checks, through the
// host's /proc, that no process carrying it is left. It needs to read
// other processes' environments there: run it as root, as CI does.
package sandboxtest

import (
	"os"
	"testing"

	"github.com/berth-sh/berth"

	"github.com/berth-sh/berth/internal/testenv"
)

// HostBusybox is where the suite expects a static busybox on the host.
const HostBusybox = "/bin/busybox"

// BusyboxPath is where an isolating provider's sandboxes see the host's
// busybox: the suite binds it there through SandboxConfig.Binds.
const BusyboxPath = "/.berth-sandboxtest/busybox"

// MarkerVar is the environment variable holding each test sandbox's
// unique marker.
const MarkerVar = "BERTH_SANDBOXTEST_MARKER"

// Options say what the provider under test claims.
type Options struct {
	// Isolated says the provider confines its processes: binds are
	// applied (busybox is bound in at BusyboxPath) and the escape cases
	// run. When false (the host provider) the escape cases and the binds
	// case are skipped, saying so, and scripts run /bin/busybox as is.
	Isolated bool
	// NoPidsLimit says the provider cannot enforce SandboxLimits.Pids:
	// the fork-loop case is then skipped, saying so. Every other case
	// still runs.
	NoPidsLimit bool
	// NoMemoryLimit says the provider cannot enforce
	// SandboxLimits.MemoryBytes on this host: the memory case is then
	// skipped, saying so.
	NoMemoryLimit bool
	// NoOOMCount says the provider does not report OOM kills in
	// ExitStatus.OOMKills: the memory case checks the kill only.
	NoOOMCount bool
	// NoSetIDFilter says the provider does not refuse set-id mode bits:
	// the set-id case is then skipped, saying so.
	NoSetIDFilter bool
	// NoNetwork says the test host gives the provider no network to
	// hand out (a test dockerd without a bridge): the network escape
	// case, whose control needs one, is skipped, saying so.
	NoNetwork bool
}

// Run runs the suite against the provider that open returns; open is
// called for each sandbox the suite opens (and by the Provider case), with
// the test at hand. Run's subtests are sequential: some set the test
// process's environment.
func Run(t *testing.T, open func(t *testing.T) berth.SandboxProvider, opts Options) {
	t.Helper()
	if fi, err := os.Stat(HostBusybox); err != nil || !fi.Mode().IsRegular() {
		testenv.Missing(t, "a static busybox", "%s is missing or not a file (%v): the suite's scripts need it; install Debian's busybox-static", HostBusybox, err)
	}
	s := &suite{open: open, opts: opts}
	for _, c := range functionalCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
	t.Run("Escape", func(t *testing.T) {
		if !opts.Isolated {
			t.Skip("the provider does not isolate (Options.Isolated is false): no escape case applies")
		}
		for _, c := range escapeCases {
			t.Run(c.name, func(t *testing.T) { c.run(t, s) })
		}
	})
}

// testCase is one named case of the suite.
type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// suite is one run of the suite.
type suite struct {
	open func(t *testing.T) berth.SandboxProvider
	opts Options
}

// WorldDir is a fresh directory every user may cross, removed when the
// test ends: what a sandbox that runs as another user (a root daemon's
// host uid) must reach, where t.TempDir's are root's 0700.
func WorldDir(t testing.TB) string {
	t.Helper()
	dir := testenv.ShortTempDir(t, "berth-sandboxtest-world-")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
