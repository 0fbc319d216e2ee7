package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/host"
)

// bwrapLimitsEnv is a manager whose default sandbox is bwrap with the given
// memory default and /tmp cap; it skips where bwrap or its memory cgroup
// is missing.
func bwrapLimitsEnv(t *testing.T, memoryMB, tmpMB int) *env {
	t.Helper()
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	if err := p.LimitsMemory(); err != nil {
		testenv.MissingCgroup(t, "a memory cgroup", "%v", err)
	}
	return newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.Sandbox.Limits = berth.SandboxLimits{MemoryBytes: int64(memoryMB) << 20, TmpBytes: int64(tmpMB) << 20}
	})
}

// A bwrap session asking memory_mb runs under it: the Session says so
// (sandbox.limits, with the /tmp cap), a command of the agent's that
// allocates past it is killed by the kernel while the agent, the session
// and the daemon go on, and the session reports the kill (a
// runtime_warning naming the command, oom_kills on terminal_exited). The
// control: the same allocation in a session with the default, larger
// limit succeeds.
func TestMemoryLimitOfASession(t *testing.T) {
	e := bwrapLimitsEnv(t, 2048, 64)
	s := e.create(berth.CreateRequest{MemoryMB: 96, PermissionMode: berth.PermApproveAll})
	if s.State != berth.StateActive {
		t.Fatalf("state %s: %+v", s.State, s.Failure)
	}
	if l := s.Sandbox.Limits; l.MemoryMB != 96 || l.TmpMB != 64 {
		t.Fatalf("sandbox.limits = %+v, want memory_mb 96, tmp_mb 64", l)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"limits":{"memory_mb":96,"tmp_mb":64}`) {
		t.Errorf("the Session's JSON does not show the limits: %s", b)
	}
	const hog = "run busybox dd if=/dev/zero of=/dev/null bs=300M count=1; echo hog=$?"
	res := e.prompt(s.ID, hog)
	if !strings.Contains(res.Text, "hog=137") {
		t.Fatalf("a command allocating 300 MiB under memory_mb 96 was not killed: %q", res.Text)
	}
	evs := e.events(s.ID)
	warned := false
	for _, ev := range ofType(evs, berth.EventRuntimeWarning) {
		warned = warned || strings.Contains(string(ev.Data), "out of memory")
	}
	if !warned {
		t.Errorf("no runtime_warning says the sandbox ran out of memory: %v", types(evs))
	}
	exited := ofType(evs, berth.EventTerminalExited)
	if len(exited) != 1 || !strings.Contains(string(exited[0].Data), `"oom_kills":`) {
		t.Errorf("terminal_exited does not count the OOM kill: %v", exited)
	}
	// The agent and the session survived the kill.
	if res := e.prompt(s.ID, "echo alive"); res.Text != "alive" {
		t.Errorf("the agent after the OOM kill answered %q", res.Text)
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil || got.State != berth.StateActive {
		t.Fatalf("session after the OOM kill: %+v, %v", got, err)
	}

	// The control: under the default (2048 MiB) the same command ends well.
	c := e.create(berth.CreateRequest{PermissionMode: berth.PermApproveAll})
	if l := c.Sandbox.Limits; l.MemoryMB != 2048 {
		t.Fatalf("default sandbox.limits = %+v, want memory_mb 2048", l)
	}
	if res := e.prompt(c.ID, hog); !strings.Contains(res.Text, "hog=0") {
		t.Errorf("the control allocation under 2048 MiB failed: %q", res.Text)
	}
}

// limitlessProvider is a provider that cannot enforce a memory limit on
// this host, under a name of an isolating one.
type limitlessProvider struct {
	berth.SandboxProvider
	name string
}

func (p limitlessProvider) Name() string { return p.name }

// Capabilities are those of the provider it is named after.
func (p limitlessProvider) Capabilities() berth.SandboxCapabilities {
	return capsProviders()[p.name].Capabilities()
}
func (limitlessProvider) LimitsMemory() error {
	return berth.Errorf(berth.EUnavailable, "no memory cgroup here (test)")
}

// memory_mb asked of a provider that cannot enforce it here is refused
// with EUnavailable (503) giving the reason, and nothing is created; the
// default limit is left out there with a runtime_warning saying why (and
// silently for host, which bounds nothing). Out-of-range values and
// values over [sandbox] max_memory_mb are EInvalid naming the field.
func TestMemoryLimitRefusals(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, limitlessProvider{host.New(), berth.SandboxDocker})
		o.Sandbox.Limits = berth.SandboxLimits{MemoryBytes: 1024 << 20, TmpBytes: 32 << 20}
		o.Sandbox.MaxMemoryMB = 4096
	})
	ctx := context.Background()
	for _, sandbox := range []string{berth.SandboxHost, berth.SandboxDocker} {
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox, MemoryMB: 512})
		if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "memory_mb cannot be enforced") {
			t.Errorf("%s with memory_mb: %v, want EUnavailable saying why", sandbox, err)
		}
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 0 {
		t.Fatalf("refused creates left sessions: %+v, %v", page, err)
	}
	for _, bad := range []int{-1, 8, 5000} {
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", MemoryMB: bad})
		var be *berth.Error
		if !berth.IsCode(err, berth.EInvalid) || !errors.As(err, &be) || be.Details["field"] != "memory_mb" {
			t.Errorf("memory_mb %d: %v, want EInvalid naming the field", bad, err)
		}
	}

	d := e.create(berth.CreateRequest{Sandbox: berth.SandboxDocker})
	if l := d.Sandbox.Limits; l.MemoryMB != 0 || l.TmpMB != 32 {
		t.Errorf("default limits on a provider without memory cgroups = %+v, want memory_mb left out", l)
	}
	if w := ofType(e.events(d.ID), berth.EventRuntimeWarning); len(w) != 1 || !strings.Contains(string(w[0].Data), "memory_mb (1024) is not enforced") {
		t.Errorf("runtime warnings = %v, want one saying memory_mb is not enforced", w)
	}
	h := e.create(berth.CreateRequest{Sandbox: berth.SandboxHost})
	if l := h.Sandbox.Limits; l.MemoryMB != 0 || l.TmpMB != 0 {
		t.Errorf("host limits = %+v, want none", l)
	}
	if w := ofType(e.events(h.ID), berth.EventRuntimeWarning); len(w) != 0 {
		t.Errorf("host session warned: %v", w)
	}
}

// limitingProvider stands for a provider that enforces memory limits
// (docker) without needing one here.
type limitingProvider struct{ berth.SandboxProvider }

func (limitingProvider) Name() string        { return berth.SandboxDocker }
func (limitingProvider) LimitsMemory() error { return nil }

// A child never gets more memory than its parent: asking for more is 403
// naming memory_mb, and a default above the parent's limit becomes the
// parent's; asking for less is kept.
func TestSpawnChildMemoryNarrowing(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, limitingProvider{host.New()})
		o.Sandbox.Default = berth.SandboxDocker
		o.Sandbox.Limits = berth.SandboxLimits{MemoryBytes: 2048 << 20}
	})
	root := e.create(berth.CreateRequest{MemoryMB: 512})
	if root.Sandbox.Limits.MemoryMB != 512 {
		t.Fatalf("root limits %+v", root.Sandbox.Limits)
	}
	_, err := e.m.SpawnChild(context.Background(), root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, MemoryMB: 1024}, "")
	if code, what := errWhat(err); code != berth.EForbidden || what != "memory_mb" {
		t.Errorf("a child asking 1024 MiB under a 512 MiB parent: %v, want permission_denied naming memory_mb", err)
	}
	if kid := e.spawn(root.ID, berth.CreateRequest{}); kid.Sandbox.Limits.MemoryMB != 512 {
		t.Errorf("a child on the default got %+v, want the parent's 512 MiB", kid.Sandbox.Limits)
	}
	if kid := e.spawn(root.ID, berth.CreateRequest{MemoryMB: 256}); kid.Sandbox.Limits.MemoryMB != 256 {
		t.Errorf("a child asking 256 MiB got %+v", kid.Sandbox.Limits)
	}
}

// agentPids are the host pids of the processes running this test binary
// with the session's id in their environment: its demo agent.
func agentPids(t *testing.T, id string) []int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if exe == self && bytes.Contains(env, []byte("BERTH_SESSION_ID="+id+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// An agent the kernel kills at its sandbox's memory limit stops the
// session agent_crashed with a sandbox failure saying out of memory (not
// a bare SIGKILL), and the daemon goes on. The agent is made the OOM
// killer's first choice (oom_score_adj 1000, written from the host), then
// a command of its allocates past the limit.
func TestAgentKilledAtTheMemoryLimit(t *testing.T) {
	testenv.NeedRoot(t, "raising the agent's oom_score_adj from the host")
	e := bwrapLimitsEnv(t, 2048, 64)
	s := e.create(berth.CreateRequest{MemoryMB: 96, PermissionMode: berth.PermApproveAll})
	pids := agentPids(t, s.ID)
	if len(pids) != 1 {
		t.Fatalf("found %d demo agents of the session: %v", len(pids), pids)
	}
	if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "oom_score_adj"), []byte("1000"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "run busybox dd if=/dev/zero of=/dev/null bs=300M count=1"}); err != nil {
		t.Fatal(err)
	}
	var got *berth.Session
	waitFor(t, "the session to stop", func() bool {
		got, _ = e.m.GetSession(ctx, s.ID)
		return got != nil && got.State == berth.StateStopped
	})
	if got.StopReason != berth.StopAgentCrashed || got.Failure == nil || got.Failure.Kind != berth.FailSandbox || !strings.Contains(got.Failure.Message, "out of memory") {
		t.Fatalf("stopped %s %+v, want agent_crashed with a sandbox failure saying out of memory", got.StopReason, got.Failure)
	}
	// The daemon goes on: another session starts and answers.
	if res := e.prompt(e.create(berth.CreateRequest{}).ID, "echo alive"); res.Text != "alive" {
		t.Errorf("after the OOM kill a new session answered %q", res.Text)
	}
}

// A child of a bounded parent is bounded where the policy has no default
// memory limit (it was left without one: an agent under memory_mb escaped
// it by spawning a child), and a child whose sandbox cannot enforce the
// parent's limit is refused, not run without it.
func TestSpawnChildKeepsTheParentsMemoryLimitWithoutADefault(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, limitingProvider{host.New()},
			limitlessProvider{SandboxProvider: host.New(), name: berth.SandboxBwrap})
		o.Sandbox.Default = berth.SandboxDocker
	})
	root := e.create(berth.CreateRequest{MemoryMB: 512})
	if root.Sandbox.Limits.MemoryMB != 512 {
		t.Fatalf("root limits %+v", root.Sandbox.Limits)
	}
	if kid := e.spawn(root.ID, berth.CreateRequest{}); kid.Sandbox.Limits.MemoryMB != 512 {
		t.Errorf("a child asking nothing got %+v, want the parent's 512 MiB", kid.Sandbox.Limits)
	}
	_, err := e.m.SpawnChild(context.Background(), root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, Sandbox: berth.SandboxBwrap}, "")
	if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), "memory_mb cannot be enforced") {
		t.Errorf("a child in a sandbox that cannot bound memory: %v, want unavailable", err)
	}
}
