package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
)

// soakUsage is what a daemon holds, counted before and after a soak.
type soakUsage struct {
	FDs        int   `json:"fds"`
	Goroutines int   `json:"goroutines"`
	Processes  int   `json:"processes"`
	DiskBytes  int64 `json:"disk_bytes"`
}

// soakSlack is how much a soak may leave above its baseline: the spare
// shim, an idle HTTP connection or two, a pool connection the store opened.
var soakSlack = soakUsage{FDs: 8, Goroutines: 16, Processes: 1, DiskBytes: 64 << 10}

// soakGrowth names each figure of after that is over before plus slack.
func soakGrowth(before, after, slack soakUsage) []string {
	var out []string
	check := func(name string, b, a, s int64) {
		if a > b+s {
			out = append(out, fmt.Sprintf("%s %d → %d (slack %d)", name, b, a, s))
		}
	}
	check("open fds", int64(before.FDs), int64(after.FDs), int64(slack.FDs))
	check("goroutines", int64(before.Goroutines), int64(after.Goroutines), int64(slack.Goroutines))
	check("processes", int64(before.Processes), int64(after.Processes), int64(slack.Processes))
	check("disk bytes outside the store", before.DiskBytes, after.DiskBytes, slack.DiskBytes)
	return out
}

// measureSoak counts what the in-process daemon on home holds: its open
// fds and goroutines, the processes started for the home (shims and
// agents), and the bytes under the home outside the store's files.
func measureSoak(home string) soakUsage {
	var u soakUsage
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.FDs = len(ents)
	}
	u.Goroutines = runtime.NumGoroutine()
	u.Processes = len(HomeProcesses(home))
	_ = filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "berth.db") {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			u.DiskBytes += fi.Size()
		}
		return nil
	})
	return u
}

// HomeProcesses returns the pids of live processes started for home: its
// shims, spares included (BERTH_SHIM_RUN), but this process.
func HomeProcesses(home string) []int {
	pids := runShims(filepath.Join(home, "run"))
	return slices.DeleteFunc(pids, func(pid int) bool { return pid == os.Getpid() })
}

// runSoak runs n create → prompt → delete cycles, inFlight at a time, on
// the bench daemon, and fails when the daemon holds more afterwards than
// before (fds, goroutines, processes, disk outside the store).
func runSoak(ctx context.Context, c *bclient.Client, d *daemon.Daemon, sandbox string, n, inFlight int, progress io.Writer) (before, after soakUsage, err error) {
	cycle := func() error {
		s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if s.State != berth.StateActive {
			return fmt.Errorf("session %s did not start: %v", s.ID, s.Failure)
		}
		r, err := c.PromptWait(ctx, s.ID, berth.PromptRequest{Text: "echo soak\nwrite soak.txt soaked\nread soak.txt"})
		if err != nil {
			return fmt.Errorf("prompt %s: %w", s.ID, err)
		}
		if r.StopReason != "end_turn" {
			return fmt.Errorf("turn of %s ended %s", s.ID, r.StopReason)
		}
		if err := c.DeleteSession(ctx, s.ID); err != nil {
			return fmt.Errorf("delete %s: %w", s.ID, err)
		}
		return nil
	}
	run := func(count int) error {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(count) {
					if err := cycle(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	// A warm-up fills the pools (store connections, HTTP keep-alives, the
	// spare shim) before the baseline is taken.
	if err := run(inFlight); err != nil {
		return before, after, err
	}
	before = settleSoak(d.Home(), soakUsage{})
	fmt.Fprintf(progress, "soak: %d cycles, %d in flight…\n", n, inFlight)
	t0 := time.Now()
	if err := run(n); err != nil {
		return before, after, err
	}
	fmt.Fprintf(progress, "soak: %d cycles in %v\n", n, time.Since(t0).Round(time.Millisecond))
	after = settleSoak(d.Home(), before)
	if g := soakGrowth(before, after, soakSlack); len(g) > 0 {
		return before, after, berth.Errorf(berth.EInternal, "the daemon holds more after the soak: %s", strings.Join(g, "; "))
	}
	return before, after, nil
}

// settleSoak measures once what is left has had up to 15 s to wind down
// (shims exiting, connections closing): until nothing is over base plus
// slack, or the time is up.
func settleSoak(home string, base soakUsage) soakUsage {
	deadline := time.Now().Add(15 * time.Second)
	for {
		u := measureSoak(home)
		if base == (soakUsage{}) || len(soakGrowth(base, u, soakSlack)) == 0 || time.Now().After(deadline) {
			return u
		}
		time.Sleep(100 * time.Millisecond)
	}
}
