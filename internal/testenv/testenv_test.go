package testenv

import (
	"fmt"
	"strings"
	"testing"
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

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
