package shim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
		return len(l.pools()[0].idle) == 1
	})
	l.mu.Lock()
	if n := len(l.pools()[1].idle); n != 0 || l.pools()[1].warm {
		t.Errorf("the second program has %d spares (warm %v) before it was used", n, l.pools()[1].warm)
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
		return len(l.pools()[1].idle) == 1
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

// idleCount is how many spares the launcher holds.
func idleCount(l *Launcher) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pools()[0].idle)
}

// waitIdle polls until the launcher holds n spares.
func waitIdle(t *testing.T, l *Launcher, n int) {
	t.Helper()
	deadline := time.Now().Add(long)
	for idleCount(l) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the launcher holds %d spares, want %d", idleCount(l), n)
		}
		time.Sleep(poll)
	}
}

// replenishedLauncher is a launcher of stand-ins for the shim (a spare
// only waits for its job on stdin) that keeps one spare, started only by
// Replenish (refillDelay is an hour until the test ends), and holds it.
func replenishedLauncher(t *testing.T) *Launcher {
	t.Helper()
	d := refillDelay
	refillDelay = time.Hour
	l := NewLauncher([]Program{{Argv: []string{"/bin/sh", "-c", "cat >/dev/null"}}}, nil, t.TempDir(), 1)
	t.Cleanup(func() {
		l.Close()
		refillDelay = d
	})
	l.Replenish()
	waitIdle(t, l, 1)
	return l
}

// Replenish starts the spare that replaces a taken one at once, not after
// refillDelay (made an hour here: only Replenish can start it).
func TestReplenishStartsTheSpareAtOnce(t *testing.T) {
	l := replenishedLauncher(t)
	for range 3 {
		sp, err := l.take(berth.SandboxHost)
		if err != nil {
			t.Fatal(err)
		}
		retire(sp)
		if n := idleCount(l); n != 0 {
			t.Fatalf("%d spares right after one was taken", n)
		}
		l.Replenish()
		waitIdle(t, l, 1)
	}
}

// A shim that says it is ready but never answers the attach (it did not
// take the connection the launcher made) fails the launch, and is ended:
// it does not hold the create.
func TestALaunchWithoutAHelloFails(t *testing.T) {
	defer func(d time.Duration) { helloTimeout = d }(helloTimeout)
	helloTimeout = 200 * time.Millisecond
	// A spare with no job exits; one with a job says it is ready, then
	// holds the connection without a word.
	script := `[ -z "$(cat)" ] && exit 0; echo '{"shim_pid":1,"agent_pid":0}'; exec sleep 60`
	l := NewLauncher([]Program{{Argv: []string{"/bin/sh", "-c", script}}}, nil, t.TempDir(), 1)
	defer func() {
		l.Close()
		if err := l.WaitChildren(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	done := launchHost(l)
	select {
	case err := <-done:
		if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(err.Error(), "hello") {
			t.Fatalf("launch: %v, want unavailable: no hello", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the launch still waits for a hello that does not come")
	}
}

// A launcher made with programs still to come does not wait for them:
// the first job does, and they are asked for once.
func TestALauncherWaitsForItsProgramsAtItsFirstJob(t *testing.T) {
	defer func(d time.Duration) { refillDelay = d }(refillDelay)
	refillDelay = time.Hour
	release := make(chan struct{})
	var asked atomic.Int32
	l := NewLauncherFunc(func() []Program {
		asked.Add(1)
		<-release
		return []Program{fakeProgram("small", berth.SandboxHost)}
	}, nil, t.TempDir(), 1)
	defer l.Close()
	done := launchHost(l)
	select {
	case err := <-done:
		t.Fatalf("the launch ended (%v) before the programs were given", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "program small") {
		t.Fatalf("launch = %v, want the small program's answer", err)
	}
	if _, _, err := l.Launch(context.Background(), Config{SessionID: "s", Provider: berth.SandboxHost}); err == nil {
		t.Fatal("a second launch of the failing program succeeded")
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the programs were asked for %d times, want 1", n)
	}
}

// launchHost launches a host session's shim in the background; the
// channel gets the launch's error.
func launchHost(l *Launcher) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := l.Launch(context.Background(), Config{SessionID: "s", Provider: berth.SandboxHost})
		done <- err
	}()
	return done
}

// A spare is told the provider of the last job given to its program, to
// prepare for it; the first spares, before any job, are told nothing.
func TestASpareExpectsTheLastJobsProvider(t *testing.T) {
	l := replenishedLauncher(t)
	expects := func() string {
		l.mu.Lock()
		defer l.mu.Unlock()
		pid := l.pools()[0].idle[0].cmd.Process.Pid
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, EnvExpect+"="); ok {
				return v
			}
		}
		return ""
	}
	if got := expects(); got != "" {
		t.Fatalf("the first spare expects %q, want nothing", got)
	}
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap, berth.SandboxHost} {
		sp, err := l.take(provider)
		if err != nil {
			t.Fatal(err)
		}
		retire(sp)
		l.Replenish()
		waitIdle(t, l, 1)
		if got := expects(); got != provider {
			t.Errorf("after a %s job the spare expects %q", provider, got)
		}
	}
}
