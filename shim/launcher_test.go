package shim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// fakeProgram is a shim program that takes its job and answers a ready
// line with an error naming it, so a test sees which program ran.
func fakeProgram(name string, providers ...string) Program {
	script := `cat >/dev/null; echo '{"code":"invalid_argument","error":"program ` + name + `"}'`
	return Program{Argv: []string{"/bin/sh", "-c", script}, Providers: providers}
}

// A job goes to the first program that serves its provider; the last one
// (no providers) takes the rest. Only the first program keeps a spare
// from the start; another gets one once it has been used.
func TestLauncherRoutesJobsByProvider(t *testing.T) {
	runDir := t.TempDir()
	l := NewLauncher([]Program{fakeProgram("small", berth.SandboxHost, berth.SandboxBwrap), fakeProgram("full")}, nil, runDir, 1)
	defer func() {
		l.Close()
		if err := l.WaitChildren(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	eventually(t, "the first program's spare", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.pools[0].idle) == 1
	})
	l.mu.Lock()
	if n := len(l.pools[1].idle); n != 0 || l.pools[1].warm {
		t.Errorf("the second program has %d spares (warm %v) before it was used", n, l.pools[1].warm)
	}
	l.mu.Unlock()

	for provider, want := range map[string]string{berth.SandboxHost: "program small", berth.SandboxBwrap: "program small", berth.SandboxDocker: "program full"} {
		cfg := Config{SessionID: "s", Provider: provider, Bundle: Bundle{Log: filepath.Join(runDir, "s.log")}}
		_, rd, err := l.Launch(context.Background(), cfg)
		if err == nil || rd.Error != want || !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("%s: ready %+v, err %v; want the error of %q", provider, rd, err, want)
		}
	}
	eventually(t, "the second program's spare, once used", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.pools[1].idle) == 1
	})
}

// A launcher with no program for a provider says so.
func TestLauncherWithoutAProgramForTheProvider(t *testing.T) {
	l := NewLauncher([]Program{fakeProgram("small", berth.SandboxHost)}, nil, t.TempDir(), 0)
	defer l.Close()
	_, _, err := l.Launch(context.Background(), Config{Provider: berth.SandboxDocker})
	if !berth.IsCode(err, berth.EInternal) || !strings.Contains(err.Error(), `"docker"`) {
		t.Fatalf("err %v", err)
	}
}
