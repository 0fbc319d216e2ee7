package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	berthhttp "github.com/berth-sh/berth/http"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// The chaos test: random concurrent prompt/wait/cancel/stop/resume/exec/
// snapshot/delete over many sessions, then the log's invariants. It is
// bounded (a count of operations per worker and a deadline) and seedable:
// BERTH_CHAOS_SEED=N reproduces a run's choices (not its timing), and its
// seed is always logged; BERTH_CHAOS_OPS=N makes a longer run.

// chaosConfig sizes one chaos run.
type chaosConfig struct {
	sessions, workers, opsPerWorker int
	deadline                        time.Duration
	// http runs the operations through the HTTP API.
	http bool
	// cgroups, when set, is where the sandboxes make their pids cgroups:
	// none may be left there.
	cgroups string
}

var chaosDefault = chaosConfig{sessions: 20, workers: 8, opsPerWorker: 30, deadline: 25 * time.Second}

// TestChaosHost runs the chaos over the host sandbox.
func TestChaosHost(t *testing.T) {
	e := newEnv(t)
	runChaos(t, e, chaosDefault)
}

// TestChaosHTTP runs the chaos through the HTTP API: no answer is a 5xx.
func TestChaosHTTP(t *testing.T) {
	e := newEnv(t)
	cfg := chaosDefault
	cfg.sessions, cfg.opsPerWorker, cfg.http = 12, 20, true
	runChaos(t, e, cfg)
}

// TestChaosBwrap runs the chaos over bwrap sandboxes with a pids limit, so
// every sandbox has a pids cgroup that must be gone at the end.
func TestChaosBwrap(t *testing.T) {
	cgroups, withBwrap := pidsBwrap(t)
	runChaos(t, newEnv(t, withBwrap), chaosOver(cgroups))
}

// TestChaosShimBwrap runs the chaos with every agent in a shim of its own
// (as berth serve runs them) over bwrap sandboxes with a pids limit.
func TestChaosShimBwrap(t *testing.T) {
	cgroups, withBwrap := pidsBwrap(t)
	e := newEnv(t)
	e.close()
	e.open(withShims(e.home), withBwrap)
	runChaos(t, e, chaosOver(cgroups))
}

// pidsBwrap is the test's own pids cgroup and the options of a manager
// whose sessions run in bwrap under a pids limit (so each has a pids
// cgroup of its own).
func pidsBwrap(t *testing.T) (string, func(*Options)) {
	cgroups := ownPidsCgroup(t)
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	if !p.LimitsPids() {
		testenv.Missing(t, "bwrap", "no pids cgroup this process may create children in")
	}
	return cgroups, func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.Sandbox.Limits.Pids = 256
	}
}

// chaosOver is the sandboxed chaos: fewer sessions, every pids cgroup under
// cgroups checked gone at the end.
func chaosOver(cgroups string) chaosConfig {
	cfg := chaosDefault
	cfg.sessions, cfg.opsPerWorker, cfg.cgroups = 10, 20, cgroups
	return cfg
}

// chaosSeed is BERTH_CHAOS_SEED or a fresh one.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv("BERTH_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BERTH_CHAOS_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// chaosRun is the shared state of one run.
type chaosRun struct {
	t  *testing.T
	e  *env
	mu sync.Mutex
	// ids are the session slots; deleted are the ids deleted so far (and
	// being deleted: a delete is recorded before it starts); all is every
	// id ever created.
	ids      []string
	deleted  map[string]bool
	all      []string
	failures []string
	ops      chaosOps
}

func (c *chaosRun) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) < 50 {
		c.failures = append(c.failures, fmt.Sprintf(format, args...))
	}
}

// sessionIDPattern finds session ids in error messages.
var sessionIDPattern = regexp.MustCompile(`ses_[0-9A-Za-z]+`)

// check records an operation's error when it is one no interleaving may
// produce: a 5xx as http/errors.go would answer it, an error naming
// another session, or not_found for a session nobody deleted.
func (c *chaosRun) check(op, id string, err error) {
	if err == nil {
		return
	}
	code := berth.ErrorCode(err)
	if st := berthhttp.StatusForCode(code); st >= 500 {
		c.fail("%s %s: answered %d (%s): %v", op, id, st, code, err)
	}
	for _, other := range sessionIDPattern.FindAllString(err.Error(), -1) {
		if other != id {
			c.fail("%s %s: error of another session %s: %v", op, id, other, err)
		}
	}
	if code == berth.ENotFound && !strings.Contains(err.Error(), "turn ") {
		c.mu.Lock()
		gone := c.deleted[id]
		c.mu.Unlock()
		if !gone {
			c.fail("%s %s: not_found although the session was never deleted: %v", op, id, err)
		}
	}
}

// pick returns a random session slot and its current id.
func (c *chaosRun) pick(r *rand.Rand) (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := r.IntN(len(c.ids))
	return i, c.ids[i]
}

func runChaos(t *testing.T, e *env, cfg chaosConfig) {
	if s := os.Getenv("BERTH_CHAOS_OPS"); s != "" {
		// A longer run, by hand: BERTH_CHAOS_OPS operations per worker.
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("BERTH_CHAOS_OPS=%q: want a positive count", s)
		}
		cfg.opsPerWorker, cfg.deadline = n, time.Duration(n)*time.Second
	}
	seed := chaosSeed(t)
	t.Logf("chaos seed %d (BERTH_CHAOS_SEED=%d reproduces the choices)", seed, seed)
	c := &chaosRun{t: t, e: e, deleted: map[string]bool{}, ops: managerOps{e.m}}
	if cfg.http {
		// Through the API as a client calls it: every answer's status is checked.
		srv := httptest.NewServer(berthhttp.NewServer(e.m, berthhttp.ServerOptions{}).Handler())
		defer srv.Close()
		client, err := bclient.New(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		c.ops = httpOps{client}
	}
	ctx := context.Background()
	for range cfg.sessions {
		s := e.create(berth.CreateRequest{})
		c.ids = append(c.ids, s.ID)
		c.all = append(c.all, s.ID)
	}
	if cfg.cgroups != "" {
		// The check below looks where the sandboxes make their cgroups.
		if made, _ := filepath.Glob(filepath.Join(cfg.cgroups, "berth-sbx*")); len(made) == 0 {
			t.Fatalf("no sandbox made its pids cgroup under %s", cfg.cgroups)
		}
	}
	deadline := time.Now().Add(cfg.deadline)
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; n < cfg.opsPerWorker && time.Now().Before(deadline); n++ {
				c.step(ctx, r)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.deadline + 60*time.Second):
		t.Fatalf("seed %d: the chaos operations hung", seed)
	}

	// Stop what runs, then read every log.
	c.mu.Lock()
	live := slices.Clone(c.ids)
	all := slices.Clone(c.all)
	deleted := c.deleted
	c.mu.Unlock()
	for _, id := range live {
		stopCtx, done := e.bound("final stop of " + id)
		_, err := e.m.StopSession(stopCtx, id)
		done()
		c.check("final stop", id, err)
	}
	if n := liveCount(e.m); n != 0 {
		c.fail("%d runtimes still live after every session was stopped", n)
	}
	readCtx, readDone := e.bound("final flush and reads")
	defer readDone()
	if err := e.log.Flush(readCtx); err != nil {
		c.fail("final flush: %v", err)
	}
	for _, id := range all {
		if deleted[id] {
			if _, err := e.store.GetSession(readCtx, id); !berth.IsCode(err, berth.ENotFound) {
				c.fail("deleted session %s: get = %v, want not_found", id, err)
			}
			continue
		}
		for _, msg := range logInvariants(e.events(id)) {
			c.fail("session %s: %s", id, msg)
		}
		s, err := e.m.GetSession(readCtx, id)
		if err != nil || s.State != berth.StateStopped {
			c.fail("session %s after the final stop: %+v, %v", id, s, err)
		}
	}
	for _, id := range all {
		if pids := sessionPIDs(id); len(pids) > 0 {
			c.fail("session %s: processes %v still carry its id", id, pids)
		}
	}
	if cfg.cgroups != "" {
		// The sandboxes' pids cgroups go once they are closed; a killed
		// process leaves its cgroup a moment after it is reaped.
		var left []string
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			left, _ = filepath.Glob(filepath.Join(cfg.cgroups, "berth-sbx*"))
			if len(left) == 0 || time.Now().After(end) {
				break
			}
		}
		for _, dir := range left {
			c.fail("pids cgroup %s left behind", dir)
		}
	}
	if len(c.failures) > 0 {
		t.Fatalf("seed %d (BERTH_CHAOS_SEED=%d reproduces it): %d findings:\n%s",
			seed, seed, len(c.failures), strings.Join(c.failures, "\n"))
	}
}

// chaosOps are the operations of a chaos run, called directly on the
// manager or through the HTTP API.
type chaosOps interface {
	// promptWait is POST /prompts?wait=true (wait) or without.
	prompt(ctx context.Context, id, text string, wait bool) error
	cancel(ctx context.Context, id string) error
	stop(ctx context.Context, id string) error
	resume(ctx context.Context, id string) error
	exec(ctx context.Context, id string) error
	snapshot(ctx context.Context, id string) error
	get(ctx context.Context, id string) error
	remove(ctx context.Context, id string) error
	create(ctx context.Context) (string, error)
}

// managerOps calls the manager.
type managerOps struct{ m *Manager }

func (o managerOps) prompt(ctx context.Context, id, text string, wait bool) error {
	res, err := o.m.Prompt(ctx, id, berth.PromptRequest{Text: text})
	if err != nil || !wait || res.TurnID == "" {
		return err
	}
	_, err = o.m.WaitTurn(ctx, id, res.TurnID)
	return err
}
func (o managerOps) cancel(ctx context.Context, id string) error {
	_, err := o.m.Cancel(ctx, id)
	return err
}
func (o managerOps) stop(ctx context.Context, id string) error {
	_, err := o.m.StopSession(ctx, id)
	return err
}
func (o managerOps) resume(ctx context.Context, id string) error {
	_, err := o.m.ResumeSession(ctx, id)
	return err
}
func (o managerOps) exec(ctx context.Context, id string) error {
	_, err := o.m.Exec(ctx, id, berth.ExecRequest{Command: []string{"true"}})
	return err
}
func (o managerOps) snapshot(ctx context.Context, id string) error {
	_, err := o.m.CreateSnapshot(ctx, id)
	return err
}
func (o managerOps) get(ctx context.Context, id string) error {
	_, err := o.m.GetSession(ctx, id)
	return err
}
func (o managerOps) remove(ctx context.Context, id string) error { return o.m.DeleteSession(ctx, id) }
func (o managerOps) create(ctx context.Context) (string, error) {
	s, err := o.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// httpOps calls the HTTP API; an error answer comes back as its code.
type httpOps struct{ c *bclient.Client }

func (o httpOps) prompt(ctx context.Context, id, text string, wait bool) error {
	var err error
	if wait {
		_, err = o.c.PromptWait(ctx, id, berth.PromptRequest{Text: text})
	} else {
		_, err = o.c.Prompt(ctx, id, berth.PromptRequest{Text: text})
	}
	return err
}
func (o httpOps) cancel(ctx context.Context, id string) error {
	_, err := o.c.Cancel(ctx, id)
	return err
}
func (o httpOps) stop(ctx context.Context, id string) error {
	_, err := o.c.StopSession(ctx, id)
	return err
}
func (o httpOps) resume(ctx context.Context, id string) error {
	_, err := o.c.ResumeSession(ctx, id)
	return err
}
func (o httpOps) exec(ctx context.Context, id string) error {
	var res berth.ExecResult
	return o.c.Do(ctx, "POST", "/v1/sessions/"+id+"/exec", nil, berth.ExecRequest{Command: []string{"true"}}, &res)
}
func (o httpOps) snapshot(ctx context.Context, id string) error {
	var res berth.Snapshot
	return o.c.Do(ctx, "POST", "/v1/sessions/"+id+"/snapshots", nil, struct{}{}, &res)
}
func (o httpOps) get(ctx context.Context, id string) error {
	_, err := o.c.GetSession(ctx, id)
	return err
}
func (o httpOps) remove(ctx context.Context, id string) error { return o.c.DeleteSession(ctx, id) }
func (o httpOps) create(ctx context.Context) (string, error) {
	s, err := o.c.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// step runs one random operation on a random session.
func (c *chaosRun) step(ctx context.Context, r *rand.Rand) {
	ops := c.ops
	slot, id := c.pick(r)
	opCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch op := r.IntN(100); {
	case op < 25:
		text := "echo hi"
		if r.IntN(2) == 0 {
			text = fmt.Sprintf("sleep %d\necho done", 50+r.IntN(300))
		}
		// Half of them wait (?wait=true): the turn's end, whatever else happens.
		wait := r.IntN(2) == 0
		err := ops.prompt(opCtx, id, text, wait)
		c.check("prompt", id, err)
		if errors.Is(err, context.DeadlineExceeded) {
			c.fail("prompt %s (wait %v): hung", id, wait)
		}
	case op < 35:
		c.check("cancel", id, ops.cancel(opCtx, id))
	case op < 50:
		c.check("stop", id, ops.stop(opCtx, id))
	case op < 68:
		c.check("resume", id, ops.resume(opCtx, id))
	case op < 78:
		c.check("exec", id, ops.exec(opCtx, id))
	case op < 90:
		c.check("snapshot", id, ops.snapshot(opCtx, id))
	case op < 95:
		c.check("get", id, ops.get(opCtx, id))
	default:
		// Delete, and put a fresh session in the slot.
		c.mu.Lock()
		c.deleted[id] = true
		c.mu.Unlock()
		c.check("delete", id, ops.remove(opCtx, id))
		nid, err := ops.create(opCtx)
		c.check("create", "", err)
		if err == nil {
			c.mu.Lock()
			if c.ids[slot] == id {
				c.ids[slot] = nid
			} else {
				// Another worker refilled the slot first: keep this one too.
				c.ids = append(c.ids, nid)
			}
			c.all = append(c.all, nid)
			c.mu.Unlock()
		}
	}
}

// logInvariants checks one session's whole log: seq runs 1..N; each
// session_started (or the session_created before the first) is closed by
// at most one session_stopped; every turn_started has exactly one
// turn_ended and no turn_ended comes without one; the log of a stopped
// session ends with session_stopped.
func logInvariants(evs []berth.Event) []string {
	var out []string
	open := false
	turns := map[string]int{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			out = append(out, fmt.Sprintf("seq %d at position %d: not contiguous", ev.Seq, i))
			break
		}
		switch ev.Type {
		case berth.EventSessionCreated, berth.EventSessionStarted:
			open = true
		case berth.EventSessionStopped:
			if !open {
				out = append(out, fmt.Sprintf("seq %d: session_stopped with no session_started since the previous one (%s)", ev.Seq, stopReasonOf(ev)))
			}
			open = false
		case berth.EventTurnStarted:
			if _, ok := turns[ev.TurnID]; ok {
				out = append(out, fmt.Sprintf("seq %d: turn %s started twice", ev.Seq, ev.TurnID))
			}
			turns[ev.TurnID] = 0
		case berth.EventTurnEnded:
			n, ok := turns[ev.TurnID]
			if !ok {
				out = append(out, fmt.Sprintf("seq %d: turn_ended of %s that never started", ev.Seq, ev.TurnID))
			}
			turns[ev.TurnID] = n + 1
		}
	}
	for id, n := range turns {
		if n != 1 {
			out = append(out, fmt.Sprintf("turn %s: %d turn_ended, want 1", id, n))
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != berth.EventSessionStopped {
		out = append(out, "the log does not end with session_stopped")
	}
	return out
}

// stopReasonOf is the stop_reason of a session_stopped event.
func stopReasonOf(ev berth.Event) string {
	var d struct {
		StopReason string `json:"stop_reason"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	return d.StopReason
}

// sessionPIDs returns the live (not zombie) processes that carry a
// session's id in their environment.
func sessionPIDs(id string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !strings.Contains(string(env), "BERTH_SESSION_ID="+id+"\x00") {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// testCgroup is the pids cgroup this test process moved itself into, so
// that the sandboxes it makes (and its shims, its children) put their
// cgroups there, apart from those of other tests running on the machine.
var testCgroup = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path, cgroup v1's pids only.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), "pids") {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/pids", parts[2], "berth-test-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", err
		}
		testCgroupMade.Store(true)
		return dir, nil
	}
	return "", errors.New("no cgroup v1 pids hierarchy")
})

// testCgroupMade is set once testCgroup made the cgroup.
var testCgroupMade atomic.Bool

// ownPidsCgroup returns testCgroup; the test is skipped (or fails under
// BERTH_REQUIRE_INTEGRATION=1) where there is none. It must be called
// before anything in the process asks bwrap whether it limits pids.
func ownPidsCgroup(t *testing.T) string {
	dir, err := testCgroup()
	if err != nil {
		testenv.MissingCgroup(t, "cgroup", "a pids cgroup of the test's own: %v", err)
	}
	return dir
}

// leaveTestCgroup moves the process back to its parent cgroup and removes
// the test's own, at the end of the tests.
func leaveTestCgroup() {
	if !testCgroupMade.Load() {
		return
	}
	dir, _ := testCgroup()
	_ = os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	for end := time.Now().Add(5 * time.Second); os.Remove(dir) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
}
