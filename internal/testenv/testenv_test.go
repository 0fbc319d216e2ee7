package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records how a test would have ended.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = sprintf(format, args...) }

func TestMissingSkipsOrFails(t *testing.T) {
	t.Setenv(RequireEnv, "")
	r := &recorder{TB: t}
	Missing(r, "docker", "no engine at %s", "unix:///x")
	if r.fatal != "" || !strings.Contains(r.skip, "docker is not available here: no engine at unix:///x") {
		t.Fatalf("without %s: fatal %q, skip %q", RequireEnv, r.fatal, r.skip)
	}
	t.Setenv(RequireEnv, "1")
	r = &recorder{TB: t}
	Missing(r, "docker", "no engine")
	if r.skip != "" || !strings.Contains(r.fatal, "docker is required") {
		t.Fatalf("with %s=1: fatal %q, skip %q", RequireEnv, r.fatal, r.skip)
	}
}

// A root-only test skips, saying why, in the unprivileged pass; outside it,
// a user's run skips and CI's fails; root runs it.
func TestNeedRoot(t *testing.T) {
	for _, tc := range []struct {
		euid                  int
		require, unprivileged string
		fatal, skip           string
	}{
		{euid: 0, require: "1", unprivileged: "1"},
		{euid: 1000, require: "1", unprivileged: "1", skip: "it ran in scripts/test's root pass"},
		{euid: 1000, require: "1", fatal: "root is required"},
		{euid: 1000, skip: "root is not available here"},
	} {
		t.Setenv(RequireEnv, tc.require)
		t.Setenv(UnprivilegedEnv, tc.unprivileged)
		r := &recorder{TB: t}
		needRoot(r, "chown", tc.euid)
		if tc.fatal == "" && r.fatal != "" || tc.fatal != "" && !strings.Contains(r.fatal, tc.fatal) ||
			tc.skip == "" && r.skip != "" || tc.skip != "" && !strings.Contains(r.skip, tc.skip) {
			t.Errorf("%+v: fatal %q, skip %q", tc, r.fatal, r.skip)
		}
	}
}

// A missing cgroup fails root's run in CI, and is a root-only matter for a
// user: a skip in the unprivileged pass.
func TestMissingCgroup(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	t.Setenv(UnprivilegedEnv, "1")
	r := &recorder{TB: t}
	missingCgroup(r, 0, "a memory cgroup", "none here")
	if !strings.Contains(r.fatal, "a memory cgroup is required") || r.skip != "" {
		t.Errorf("root: fatal %q, skip %q", r.fatal, r.skip)
	}
	r = &recorder{TB: t}
	missingCgroup(r, 1000, "a memory cgroup", "none here")
	if r.fatal != "" || !strings.Contains(r.skip, "a memory cgroup: none here") || !strings.Contains(r.skip, "root pass") {
		t.Errorf("a user in the unprivileged pass: fatal %q, skip %q", r.fatal, r.skip)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// A Buffer is written and read at once (run with -race), and Bytes is a
// copy the writer does not change afterwards.
func TestBufferWhileWritten(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			_, _ = b.Write([]byte("x"))
		}
	}()
	for b.Len() < 1000 {
		_ = b.String()
	}
	<-done
	got := b.Bytes()
	_, _ = b.Write([]byte("y"))
	if string(got) != strings.Repeat("x", 1000) || b.String() != string(got)+"y" || b.Len() != 1001 {
		t.Fatalf("Bytes %d bytes, String %d bytes", len(got), len(b.String()))
	}
}

// WaitFor returns once its condition holds, and fails the test, naming
// what it waited for, when it never does.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Minute, "the third ask", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("asked %d times", n)
	}
	r := &recorder{TB: t}
	WaitFor(r, 20*time.Millisecond, "nothing", func() bool { return false })
	if !strings.Contains(r.fatal, "waiting for nothing") {
		t.Fatalf("fatal %q", r.fatal)
	}
}
