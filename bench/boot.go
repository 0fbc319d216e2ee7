package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/shim"
)

// bootResult is what bench measures of daemons that hold many live
// sessions: the memory of one that created them, and the boot of the next
// one, which reattaches them. Both daemons are `berth serve` processes of
// their own, so their CPU time and memory are theirs alone.
type bootResult struct {
	// Live* is a daemon with that many idle demo sessions it created:
	// resident (VmRSS) and peak resident (VmHWM) KiB, the same daemon's
	// VmRSS before its first session, and what each session added.
	LiveSessions int   `json:"live_sessions,omitempty"`
	LiveRSSKB    int64 `json:"live_daemon_rss_kb,omitempty"`
	LiveHWMKB    int64 `json:"live_daemon_hwm_kb,omitempty"`
	EmptyRSSKB   int64 `json:"empty_daemon_rss_kb,omitempty"`
	// EmptyAPIMs and EmptyCPUMs are the same daemon's start: to its API
	// answering, and the CPU time it used for that, with no session.
	EmptyAPIMs       float64 `json:"empty_daemon_api_ms,omitempty"`
	EmptyCPUMs       float64 `json:"empty_daemon_cpu_ms,omitempty"`
	LivePerSessionKB float64 `json:"live_daemon_per_session_kb,omitempty"`
	ReattachSessions int     `json:"reattach_sessions,omitempty"`
	// ReattachFloorMs is the shims' own part of a boot: bench connects
	// to every one, 128 at a time (the daemon: 16), and waits for its
	// hello, with no daemon work at all.
	ReattachFloorMs float64 `json:"reattach_floor_ms,omitempty"`
	// ReattachShimsCPUMs is the CPU time the shims used during the boot,
	// all of them together.
	ReattachShimsCPUMs float64 `json:"reattach_shims_cpu_ms,omitempty"`
	ReattachAPIMs      float64 `json:"reattach_api_ms,omitempty"`
	ReattachAllMs      float64 `json:"reattach_all_ms,omitempty"`
	ReattachCPUMs      float64 `json:"reattach_cpu_ms,omitempty"`
	ReattachRSSKB      int64   `json:"reattach_daemon_rss_kb,omitempty"`
	ReattachHWMKB      int64   `json:"reattach_daemon_hwm_kb,omitempty"`
	// EmptyReads and ReattachReads are when each read route first
	// answered, from the daemon's start: on the empty home, and on the
	// boot that reattaches (docs/api.md, "Agents outlive the daemon (shims)").
	EmptyReads    bootReads `json:"empty_reads"`
	ReattachReads bootReads `json:"reattach_reads"`
	// ReattachBoots are the boots --reattach-against asks for, in order.
	ReattachBoots []bootSample `json:"reattach_boots,omitempty"`
	// GoneShimsCPUMs is the CPU time the shims of the reattached sessions
	// used, all together, over GoneMs with no daemon (--reattach-gone).
	GoneMs         float64 `json:"gone_ms,omitempty"`
	GoneShimsCPUMs float64 `json:"gone_shims_cpu_ms,omitempty"`
}

// bootReads are the milliseconds from a daemon's start to the first
// answer of each read route, polled all at once; Max is the last of them.
type bootReads struct {
	HealthMs  float64 `json:"health_ms,omitempty"`
	ListMs    float64 `json:"list_ms,omitempty"`
	SessionMs float64 `json:"session_ms,omitempty"`
	EventsMs  float64 `json:"events_ms,omitempty"`
	MetricsMs float64 `json:"metrics_ms,omitempty"`
	MaxMs     float64 `json:"max_ms,omitempty"`
}

// benchServe is a `berth serve` process that bench started on a home of
// its own, and a client on its Unix socket.
type benchServe struct {
	cmd    *exec.Cmd
	c      *bclient.Client
	start  time.Time
	exited chan struct{}
	err    error // the process's end, once exited is closed
	out    *bytes.Buffer
	outMu  *sync.Mutex
}

// benchBootOptions say which binary bench runs as the daemon and with what.
type benchBootOptions struct {
	binary   string // "" is this binary
	storeURL string
	sandbox  string
	profile  string // BERTH_BOOT_PROFILE of the booting daemon
	addr     string // the TCP address to listen on ("" for a free loopback port)
	args     []string
	// against is a second binary booted over the same sessions after
	// the timed boot, rounds times each, alternating with binary.
	against string
	rounds  int
	// gone, when set, is how long the shims are left with no daemon after
	// the boots, their CPU time measured.
	gone time.Duration
}

// serveHealthy starts `berth serve` on home (startBenchServe) and waits
// until it answers health; the caller stops it.
func serveHealthy(ctx context.Context, o benchBootOptions, home string) (*benchServe, error) {
	d, err := startBenchServe(o, home)
	if err != nil {
		return nil, err
	}
	if _, err := d.health(ctx, 30*time.Second); err != nil {
		_ = d.stop(time.Minute)
		return nil, err
	}
	return d, nil
}

// startBenchServe starts `berth serve` on home (listening on its socket
// and on a free loopback port) and returns once the process runs.
func startBenchServe(o benchBootOptions, home string, env ...string) (*benchServe, error) {
	bin := o.binary
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bin = self
	}
	addr := o.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	args := []string{"serve", "--home", home, "--addr", addr}
	if o.storeURL != "" {
		args = append(args, "--store", o.storeURL)
	}
	args = append(args, o.args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &benchServe{cmd: cmd, exited: make(chan struct{}), out: &bytes.Buffer{}, outMu: &sync.Mutex{}}
	cmd.Stdout, cmd.Stderr = lockedWriter{s.out, s.outMu}, lockedWriter{s.out, s.outMu}
	c, err := bclient.New("unix:" + filepath.Join(home, bclient.SocketName))
	if err != nil {
		return nil, err
	}
	s.c = c
	s.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// lockedWriter serialises the daemon's stdout and stderr into one buffer.
type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// failed describes a daemon that ended or misbehaved, with its last output.
func (s *benchServe) failed(what string, err error) error {
	s.outMu.Lock()
	out := s.out.String()
	s.outMu.Unlock()
	if len(out) > 2000 {
		out = out[len(out)-2000:]
	}
	return fmt.Errorf("bench daemon: %s: %v\n%s", what, err, out)
}

// health polls the daemon's health until it answers, and returns it.
func (s *benchServe) health(ctx context.Context, deadline time.Duration) (*berth.Health, error) {
	end := time.Now().Add(deadline)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := s.c.Health(hctx)
		cancel()
		if err == nil {
			return h, nil
		}
		select {
		case <-s.exited:
			return nil, s.failed("exited", s.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(end) {
			return nil, s.failed("no answer", err)
		}
	}
}

// stop ends the daemon with SIGTERM (its config says whether its sessions
// stop or stay for the next one) and waits for it, killing its group
// after the bound.
func (s *benchServe) stop(bound time.Duration) error {
	defer s.c.Close()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		var ee *exec.ExitError
		if s.err != nil && !errors.As(s.err, &ee) {
			return s.err
		}
		return nil
	case <-time.After(bound):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		return s.failed("did not stop in time", nil)
	}
}

// kill ends the daemon with SIGKILL, as a crash would: its shims, in
// sessions of their own, run on with their agents.
func (s *benchServe) kill() {
	defer s.c.Close()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// firstAnswers polls the daemon's read routes all at once, each until it
// answers, and returns when each first did, from the daemon's start: its
// health, the first page of its sessions, its metrics, and, when id is
// not "", that session and its events.
func (s *benchServe) firstAnswers(ctx context.Context, id string) (bootReads, error) {
	var r bootReads
	routes := []struct {
		at   *float64
		read func(context.Context) error
	}{
		{&r.HealthMs, func(ctx context.Context) error { _, err := s.c.Health(ctx); return err }},
		{&r.ListMs, func(ctx context.Context) error {
			_, err := s.c.ListSessions(ctx, berth.SessionFilter{Limit: 100})
			return err
		}},
		{&r.MetricsMs, func(ctx context.Context) error { return s.c.Do(ctx, "GET", "/metrics", nil, nil, nil) }},
	}
	if id != "" {
		routes = append(routes, []struct {
			at   *float64
			read func(context.Context) error
		}{
			{&r.SessionMs, func(ctx context.Context) error { _, err := s.c.GetSession(ctx, id); return err }},
			{&r.EventsMs, func(ctx context.Context) error {
				_, err := s.c.ListEvents(ctx, id, berth.EventFilter{Limit: 100})
				return err
			}},
		}...)
	}
	errs := make([]error, len(routes))
	var wg sync.WaitGroup
	for i, rt := range routes {
		wg.Go(func() {
			for {
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := rt.read(rctx)
				cancel()
				if err == nil {
					*rt.at = msSince(s.start)
					return
				}
				if time.Since(s.start) > 2*time.Minute {
					errs[i] = s.failed("no answer", err)
					return
				}
				select {
				case <-s.exited:
					errs[i] = s.failed("exited", s.err)
					return
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	r.MaxMs = max(r.HealthMs, r.ListMs, r.SessionMs, r.EventsMs, r.MetricsMs)
	return r, errors.Join(errs...)
}

// activeSessions counts the sessions the daemon lists as active.
func (s *benchServe) activeSessions(ctx context.Context) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := s.c.ListSessions(ctx, berth.SessionFilter{State: berth.StateActive, Limit: 500, Cursor: cursor})
		if err != nil {
			return 0, err
		}
		n += len(page.Sessions)
		if page.NextCursor == "" || len(page.Sessions) == 0 {
			return n, nil
		}
		cursor = page.NextCursor
	}
}

// writeBenchConfig writes the bench daemons' config.toml into home.
func writeBenchConfig(home string, maxSessions int, stopOnExit bool) error {
	cfg := fmt.Sprintf("[limits]\nmax_sessions = %d\n\n[server]\nstop_sessions_on_exit = %t\n", maxSessions, stopOnExit)
	return os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600)
}

// benchBoot starts a daemon, measures its memory empty and with n idle demo
// sessions it created, and, with reattach, ends it leaving them running and
// times the boot of the next daemon that reattaches them all: to its API
// answering, to every session active, and the CPU time it used for that.
// The last daemon stops the sessions when bench ends it.
func benchBoot(ctx context.Context, o benchBootOptions, n int, reattach bool, res *Result, progress io.Writer) error {
	home, err := os.MkdirTemp("", "berth-bench-boot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if err := writeBenchConfig(home, n+1, !reattach); err != nil {
		return err
	}
	d, err := startBenchServe(o, home)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = d.stop(3 * time.Minute)
		}
	}()
	if res.EmptyReads, err = d.firstAnswers(ctx, ""); err != nil {
		return err
	}
	res.EmptyAPIMs = res.EmptyReads.HealthMs
	if cpu, err := procCPU(d.cmd.Process.Pid); err == nil {
		res.EmptyCPUMs = float64(cpu.Microseconds()) / 1000
	}
	empty, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "creating %d sessions…\n", n)
	if err := createMany(ctx, d.c, o.sandbox, n); err != nil {
		return err
	}
	live, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	res.LiveSessions, res.EmptyRSSKB, res.LiveRSSKB, res.LiveHWMKB = n, empty["VmRSS"], live["VmRSS"], live["VmHWM"]
	res.LivePerSessionKB = float64(live["VmRSS"]-empty["VmRSS"]) / float64(n)
	measureShims(filepath.Join(home, "run"), &res.shimResult)
	measureTotals(home, d.cmd.Process.Pid, n, &res.shimResult)
	if !reattach {
		return nil
	}
	// A session whose GET and events the booting daemon is asked for.
	page, err := d.c.ListSessions(ctx, berth.SessionFilter{Limit: 1})
	if err != nil || len(page.Sessions) == 0 {
		return d.failed("list", fmt.Errorf("no session listed (%v)", err))
	}
	probe := page.Sessions[0].ID
	// As a crash leaves them: the shims run on, the daemon is gone.
	stopped = true
	d.kill()

	if res.ReattachFloorMs, err = attachEveryShim(ctx, filepath.Join(home, "run"), n); err != nil {
		return err
	}
	shimsBefore := shimsCPU(filepath.Join(home, "run"))
	fmt.Fprintf(progress, "booting a daemon that reattaches %d sessions…\n", n)
	if err := writeBenchConfig(home, n+1, true); err != nil {
		return err
	}
	var env []string
	if o.profile != "" {
		env = append(env, "BERTH_BOOT_PROFILE="+o.profile)
	}
	d, err = startBenchServe(o, home, env...)
	if err != nil {
		return err
	}
	stopped = false
	boot, err := d.timeBoot(ctx, probe)
	if err != nil {
		return err
	}
	res.ReattachAPIMs, res.ReattachAllMs, res.ReattachReads = boot.APIMs, boot.AllMs, boot.Reads
	cpu, err := procCPU(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	res.ReattachCPUMs = float64(cpu.Microseconds()) / 1000
	res.ReattachShimsCPUMs = float64((shimsCPU(filepath.Join(home, "run")) - shimsBefore).Microseconds()) / 1000
	if got, err := d.activeSessions(ctx); err != nil || got != n {
		return d.failed("reattach", fmt.Errorf("%d of %d sessions active (%v)", got, n, err))
	}
	after, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	res.ReattachSessions, res.ReattachRSSKB, res.ReattachHWMKB = n, after["VmRSS"], after["VmHWM"]
	if o.against != "" {
		// The same shims, booted again and again: each binary's boots at the
		// machine's state of the moment, one beside the other.
		for i := range 2 * o.rounds {
			bo, label := o, "daemon-binary"
			if (i%2 == 0) != (i/2%2 == 0) {
				bo.binary, label = o.against, "against"
			}
			d.kill()
			stopped = true
			fmt.Fprintf(progress, "booting %s again (%d of %d)…\n", label, i+1, 2*o.rounds)
			if d, err = startBenchServe(bo, home); err != nil {
				return err
			}
			stopped = false
			b, err := d.timeBoot(ctx, probe)
			if err != nil {
				return err
			}
			b.Daemon = label
			if cpu, err := procCPU(d.cmd.Process.Pid); err == nil {
				b.CPUMs = float64(cpu.Microseconds()) / 1000
			}
			b.Load = loadAverage()
			res.ReattachBoots = append(res.ReattachBoots, b)
		}
	}
	if o.gone > 0 {
		// The shims of a daemon that went, while none is back.
		d.kill()
		stopped = true
		runDir := filepath.Join(home, "run")
		fmt.Fprintf(progress, "no daemon for %s…\n", o.gone)
		before := shimsCPU(runDir)
		select {
		case <-time.After(o.gone):
		case <-ctx.Done():
			return ctx.Err()
		}
		res.GoneMs = float64(o.gone.Milliseconds())
		res.GoneShimsCPUMs = float64((shimsCPU(runDir) - before).Microseconds()) / 1000
		// A daemon again, to stop the sessions when bench ends it.
		if d, err = startBenchServe(o, home); err != nil {
			return err
		}
		stopped = false
		if _, err := d.timeBoot(ctx, probe); err != nil {
			return err
		}
	}
	return nil
}

// bootSample is one daemon's boot over live sessions: from its start to
// its API's first answer, to every session active, and to each read
// route's first answer while it reattached them.
type bootSample struct {
	Daemon string    `json:"daemon,omitempty"`
	APIMs  float64   `json:"api_ms"`
	AllMs  float64   `json:"all_active_ms"`
	CPUMs  float64   `json:"daemon_cpu_ms,omitempty"`
	Load   float64   `json:"load,omitempty"`
	Reads  bootReads `json:"reads"`
}

// timeBoot times the boot of s, a daemon just started over live sessions:
// the read routes (probe a session to read) are polled while it
// reattaches them.
func (s *benchServe) timeBoot(ctx context.Context, probe string) (bootSample, error) {
	var b bootSample
	reads := make(chan error, 1)
	go func() {
		var err error
		b.Reads, err = s.firstAnswers(ctx, probe)
		reads <- err
	}()
	if _, err := s.health(ctx, 30*time.Second); err != nil {
		<-reads
		return b, err
	}
	b.APIMs = msSince(s.start)
	for {
		h, err := s.health(ctx, 30*time.Second)
		if err != nil {
			<-reads
			return b, err
		}
		if h.Reattaching == 0 {
			break
		}
		if time.Since(s.start) > 2*time.Minute {
			<-reads
			return b, s.failed("reattach", fmt.Errorf("%d sessions still reattaching", h.Reattaching))
		}
		time.Sleep(time.Millisecond)
	}
	b.AllMs = msSince(s.start)
	return b, <-reads
}

// attachEveryShim connects to every shim in runDir, 128 at a time, waits
// for its hello and lets go of it at once, and returns how long that took
// in milliseconds: the floor of a boot that reattaches them.
func attachEveryShim(ctx context.Context, runDir string, want int) (float64, error) {
	bundles, _ := shim.ScanRunDir(runDir)
	if len(bundles) != want {
		return 0, fmt.Errorf("%d shims in the run directory, want %d", len(bundles), want)
	}
	sem := make(chan struct{}, 128)
	errs := make(chan error, len(bundles))
	var wg sync.WaitGroup
	t0 := time.Now()
	for b := range bundles {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			p, err := shim.Attach(actx, b.Socket, 0)
			if err != nil {
				errs <- err
				return
			}
			p.Detach()
		})
	}
	wg.Wait()
	ms := msSince(t0)
	close(errs)
	return ms, <-errs
}

// shimsCPU is the CPU time the shims serving sessions in runDir have used.
func shimsCPU(runDir string) time.Duration {
	var sum time.Duration
	for _, pid := range ShimPIDs(runDir) {
		if cpu, err := procCPU(pid); err == nil {
			sum += cpu
		}
	}
	return sum
}

// createMany creates n demo sessions, 8 at a time, each active.
func createMany(ctx context.Context, c *bclient.Client, sandbox string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
				if err == nil && s.State != berth.StateActive {
					err = fmt.Errorf("session %s did not start: %v", s.ID, s.Failure)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for range n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// msSince is the time since t in milliseconds.
func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// procStatus reads the KiB figures of /proc/PID/status (VmRSS, VmHWM, …).
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			out[k], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return out, nil
}

// procCPU is the CPU time (user + system) a process has used so far:
// the scheduler's own count in nanoseconds summed over its threads
// (/proc/PID/task/*/schedstat), else the 10 ms ticks of /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 1 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	if sum > 0 {
		return sum, nil
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0, err
	}
	// Linux reports them in clock ticks of USER_HZ, 100 a second.
	return time.Duration(st.UTime+st.STime) * 10 * time.Millisecond, nil
}

// printBootReads writes when each read route of a booting daemon first
// answered.
func printBootReads(w io.Writer, what string, r bootReads) {
	fmt.Fprintf(w, "%s\t%.0f ms\thealth %.0f, list %.0f, session %.0f, events %.0f, metrics %.0f ms\n",
		what, r.MaxMs, r.HealthMs, r.ListMs, r.SessionMs, r.EventsMs, r.MetricsMs)
}
