// Package testenv is what tests share. About the services they need: a
// test whose service (PostgreSQL, bubblewrap, Docker) is missing skips on
// a developer's machine and fails where BERTH_REQUIRE_INTEGRATION=1 (CI),
// so a missing service can never pass for a green run. And the small
// tools every package's tests would write again: a buffer a child
// process writes while the test reads it (Buffer), and polling with a
// deadline (WaitFor).
package testenv

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireEnv is the variable that makes a missing service a failure.
const RequireEnv = "BERTH_REQUIRE_INTEGRATION"

// Required reports whether missing services fail tests.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Missing ends the test because service is not available here (why):
// a failure when Required, else a skip.
func Missing(tb testing.TB, service, why string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(why, args...)
	if Required() {
		tb.Fatalf("%s is required (%s=1) but not available: %s", service, RequireEnv, reason)
		return
	}
	tb.Skipf("%s is not available here: %s (%s=1 makes this a failure)", service, reason, RequireEnv)
}

// UnprivilegedEnv, set to 1 by scripts/test only, marks its second pass:
// the sandbox suites and the end-to-end tests run again as an
// unprivileged user after the whole suite ran as root.
const UnprivilegedEnv = "BERTH_TEST_UNPRIVILEGED"

// NeedRoot ends the test unless it runs as root (why says what needs it):
// a skip in scripts/test's unprivileged pass (UnprivilegedEnv), where the
// test ran already in the root pass, saying so; else a failure when
// Required, so that CI never passes without the root-only checks, else a
// skip.
func NeedRoot(tb testing.TB, why string) {
	tb.Helper()
	needRoot(tb, why, os.Geteuid())
}

// MissingCgroup ends the test because a cgroup it needs (service) is not
// available here (why). Root has one wherever the kernel does: as
// Missing, a failure when Required. A user has one only where a cgroup
// was delegated to it: as NeedRoot (a skip in the unprivileged pass,
// whose root pass ran the test).
func MissingCgroup(tb testing.TB, service, why string, args ...any) {
	tb.Helper()
	missingCgroup(tb, os.Geteuid(), service, fmt.Sprintf(why, args...))
}

// missingCgroup is MissingCgroup for a process whose effective uid is
// euid.
func missingCgroup(tb testing.TB, euid int, service, reason string) {
	tb.Helper()
	if euid != 0 {
		needRoot(tb, service+": "+reason, euid)
		return
	}
	Missing(tb, service, "%s", reason)
}

// needRoot is NeedRoot for a process whose effective uid is euid.
func needRoot(tb testing.TB, why string, euid int) {
	tb.Helper()
	switch {
	case euid == 0:
	case os.Getenv(UnprivilegedEnv) == "1":
		tb.Skipf("needs root (%s): it ran in scripts/test's root pass; this is the unprivileged one (%s=1)", why, UnprivilegedEnv)
	default:
		Missing(tb, "root", "%s", why)
	}
}

// InPrivateMounts runs fn on a thread of its own that has left the
// process's mount namespace for a private copy: the mounts fn makes are
// seen by that thread alone and go with it when fn returns (the thread
// ends). fn must not call tb's Fatal or Skip (another goroutine): it
// returns its error, which fails the test. Needs root.
func InPrivateMounts(tb testing.TB, fn func() error) {
	tb.Helper()
	NeedRoot(tb, "a mount namespace of its own needs root")
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, with its namespace, ends with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("unshare the mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- fmt.Errorf("make the mounts private: %w", err)
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		tb.Fatal(err)
	}
}
