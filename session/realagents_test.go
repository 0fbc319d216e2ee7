package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/internal/modelstub"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// Real agents, installed by scripts/test with npm (pinned versions, into
// a cache prefix it names in BERTH_TEST_AGENTS), run whole turns under
// berth in bwrap with no network: the model API is a stand-in
// (internal/modelstub) on the sandbox's own loopback, or, for Gemini CLI,
// its own --fake-responses file.

// stubAddr is where the model stand-in listens inside each sandbox (its
// own network namespace: every sandbox has its own 127.0.0.1).
const stubAddr = "127.0.0.1:18080"

// Environment of the node stand-in (nodeWrap).
const (
	realNodeEnv = "BERTH_TEST_REAL_NODE"
	stubAddrEnv = "BERTH_TEST_MODELSTUB_ADDR"
)

// nodeWrap is the test binary run as "node" inside a sandbox (first in
// the agent's PATH, so `#!/usr/bin/env node` finds it): it serves the
// model stand-in on stubAddr, unless one of the sandbox's processes does
// already, and runs the real node with the same arguments and stdio.
func nodeWrap() int {
	if l, err := net.Listen("tcp", os.Getenv(stubAddrEnv)); err == nil {
		go func() { _ = (&modelstub.Server{}).Serve(l) }()
	}
	cmd := exec.Command(os.Getenv(realNodeEnv), os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodewrap:", err)
		return 127
	}
	return 0
}

// realAgent returns the command npm installed for bin in the prefix
// scripts/test names in BERTH_TEST_AGENTS.
func realAgent(t *testing.T, bin string) string {
	t.Helper()
	dir := os.Getenv("BERTH_TEST_AGENTS")
	if dir == "" {
		testenv.Missing(t, "real agents", "BERTH_TEST_AGENTS is not set (scripts/test installs the agents with npm and sets it)")
	}
	p := filepath.Join(dir, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, "real agents", "%s is not installed: %v", bin, err)
	}
	return p
}

// stubbedEnv is the catalog env that runs an agent's node through
// nodeWrap, so that the model stand-in serves it inside its sandbox.
func stubbedEnv(t *testing.T, env map[string]string) map[string]string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "node is not installed (Debian package nodejs)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrap := t.TempDir()
	if err := os.Symlink(self, filepath.Join(wrap, "node")); err != nil {
		t.Fatal(err)
	}
	env[agentEnvVar] = "nodewrap"
	env[realNodeEnv], env[stubAddrEnv] = node, stubAddr
	env["PATH"] = wrap + ":/usr/local/bin:/usr/bin:/bin"
	return env
}

// realEnv is a manager whose sessions run in bwrap, with agents, the user's
// home user (their home_files) and a handshake deadline real agents meet.
func realEnv(t *testing.T, user string, agents ...berth.AgentSpec) *env {
	t.Helper()
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	return newEnv(t, withAgents(agents...), func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.UserHome = user
		o.Limits.HandshakeTimeout = 2 * time.Minute
	})
}

// realTurns runs what every real agent must do under berth: a text turn;
// a tool turn whose permission is approved through the API and whose file
// lands in the workspace; stop, resume, another turn. hello and again are
// what the two text turns' answers hold.
func realTurns(t *testing.T, e *env, agent, ws, hello, again string) {
	t.Helper()
	realTurnsIn(t, e, berth.PermAsk, agent, ws, hello, again)
}

// realTurnsIn is realTurns in permission mode perm.
func realTurnsIn(t *testing.T, e *env, perm, agent, ws, hello, again string) {
	t.Helper()
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: agent, Workspace: ws, PermissionMode: perm})
	wantActive(t, e, s.ID)
	if res := e.realPrompt(s.ID, "hello there"); res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, hello) {
		t.Fatalf("text turn: %+v; stderr: %s", res, stderrOf(e, s.ID))
	}
	target := filepath.Join(ws, agent+".txt")
	r := e.promptOK(s.ID, "write "+target+" made by "+agent, "")
	p := e.realPermission(s.ID, r.TurnID)
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	if res := e.waitRealResult(s.ID, r.TurnID); res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "wrote it") {
		t.Fatalf("tool turn: %+v; stderr: %s", res, stderrOf(e, s.ID))
	}
	// An agent that writes by a patch ends the file with a newline.
	if b, err := os.ReadFile(target); err != nil || strings.TrimSuffix(string(b), "\n") != "made by "+agent {
		t.Fatalf("the file the tool wrote: %q, %v", b, err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatalf("resume: %v; stderr: %s", err, stderrOf(e, s.ID))
	}
	wantActive(t, e, s.ID)
	if res := e.realPrompt(s.ID, "hello again"); res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, again) {
		t.Fatalf("turn after resume: %+v; stderr: %s", res, stderrOf(e, s.ID))
	}
}

// realPermission waits for the permission a real agent's turn asks.
func (e *env) realPermission(id, turn string) *berth.Permission {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ps, err := e.m.ListPermissions(context.Background(), id, berth.PermissionPending)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ps) > 0 {
			return ps[0]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		res, err := e.m.WaitTurn(ctx, id, turn)
		cancel()
		if err == nil {
			var evs []string
			for _, ev := range e.events(id) {
				evs = append(evs, ev.Type+" "+string(ev.Data))
			}
			e.t.Fatalf("the turn ended without asking: %+v; events %v; stderr: %s", res, evs, stderrOf(e, id))
		}
	}
	e.t.Fatalf("no permission asked; events %v; stderr: %s", types(e.events(id)), stderrOf(e, id))
	return nil
}

// wantActive fails unless the session is active.
func wantActive(t *testing.T, e *env, id string) {
	t.Helper()
	got, err := e.m.GetSession(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateActive {
		t.Fatalf("state %s (%s), failure %+v; stderr: %s", got.State, got.StopReason, got.Failure, stderrOf(e, id))
	}
}

// realPrompt runs one turn to its end, with the time a real agent takes.
func (e *env) realPrompt(id, text string) *berth.TurnResult {
	e.t.Helper()
	return e.waitRealResult(id, e.promptOK(id, text, "").TurnID)
}

// waitRealResult waits for a turn of a real agent.
func (e *env) waitRealResult(id, turn string) *berth.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.m.WaitTurn(ctx, id, turn)
	if err != nil {
		e.t.Fatalf("wait %s: %v; stderr: %s", turn, err, stderrOf(e, id))
	}
	return res
}

// Claude Code's ACP adapter against the Anthropic stand-in
// (ANTHROPIC_BASE_URL), in its "default" permission mode (asks before
// a write) from ~/.claude/settings.json, a home file.
func TestRealClaudeBwrap(t *testing.T) {
	// Parallel: each waits mostly on its agent (node starting, its turns).
	t.Parallel()
	command := realAgent(t, "claude-agent-acp")
	user := t.TempDir()
	testenv.WriteFile(t, filepath.Join(user, ".claude/settings.json"), `{"permissions":{"defaultMode":"default"}}`, 0o600)
	env := stubbedEnv(t, map[string]string{"ANTHROPIC_BASE_URL": "http://" + stubAddr, "ANTHROPIC_API_KEY": "sk-stub",
		"DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
	e := realEnv(t, user, berth.AgentSpec{Name: "claude", Command: command, Env: env,
		HomeFiles: []string{".claude/settings.json", ".claude.json"}})
	realTurns(t, e, "claude", t.TempDir(), "stub: hello there", "stub: hello again")
}

// Claude Code's adapter with no settings opens in auto, where it answers
// permissions by itself: berth puts it in the catalog's asking mode
// (default), so approve-reads asks for its write, after a resume too.
func TestRealClaudeIsPutInItsAskingMode(t *testing.T) {
	t.Parallel()
	command := realAgent(t, "claude-agent-acp")
	env := stubbedEnv(t, map[string]string{"ANTHROPIC_BASE_URL": "http://" + stubAddr, "ANTHROPIC_API_KEY": "sk-stub",
		"DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
	realAskingMode(t, berth.AgentSpec{Name: "claude", Command: command, Env: env}, "auto")
}

// Qwen Code with no --approval-mode opens in auto (its classifier
// approves what it deems safe): berth puts it in default too.
func TestRealQwenIsPutInItsAskingMode(t *testing.T) {
	t.Parallel()
	command := realAgent(t, "qwen")
	env := stubbedEnv(t, map[string]string{"OPENAI_BASE_URL": "http://" + stubAddr + "/v1", "OPENAI_API_KEY": "sk-stub",
		"OPENAI_MODEL": "stub-model"})
	realAskingMode(t, berth.AgentSpec{Name: "qwen", Command: command, Args: []string{"--acp"}, Env: env, HomeFiles: []string{".qwen/"}}, "auto")
}

// realAskingMode runs spec, with the built-in catalog entry's modes, in
// approve-reads: the agent opens in from, berth sets the asking mode, and
// its write asks, at start and after a resume.
func realAskingMode(t *testing.T, spec berth.AgentSpec, from string) {
	t.Helper()
	cat, err := config.Default().Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	builtin, _ := cat.Get(spec.Name)
	spec.SelfDecidingModes, spec.AskingMode = builtin.SelfDecidingModes, builtin.AskingMode
	e := realEnv(t, t.TempDir(), spec)
	ctx := context.Background()
	ws := t.TempDir()
	s := e.create(berth.CreateRequest{Agent: spec.Name, Workspace: ws})
	for i, step := range []string{"start", "resume"} {
		if i > 0 {
			if _, err := e.m.StopSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
				t.Fatalf("resume: %v; stderr: %s", err, stderrOf(e, s.ID))
			}
		}
		wantActive(t, e, s.ID)
		if m := e.modesOf(s.ID); m.Current != spec.AskingMode || m.SetBy != "berth" || m.ForcedFrom != from {
			t.Fatalf("modes after the %s = %+v", step, m)
		}
		target := filepath.Join(ws, step+".txt")
		r := e.promptOK(s.ID, "write "+target+" made after the "+step, "")
		p := e.realPermission(s.ID, r.TurnID)
		if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil {
			t.Fatal(err)
		}
		if res := e.waitRealResult(s.ID, r.TurnID); res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "wrote it") {
			t.Fatalf("tool turn after the %s: %+v; stderr: %s", step, res, stderrOf(e, s.ID))
		}
	}
}

// Qwen Code against the OpenAI-compatible stand-in (OPENAI_BASE_URL), in
// its "default" approval mode.
func TestRealQwenBwrap(t *testing.T) {
	t.Parallel()
	command := realAgent(t, "qwen")
	env := stubbedEnv(t, map[string]string{"OPENAI_BASE_URL": "http://" + stubAddr + "/v1", "OPENAI_API_KEY": "sk-stub",
		"OPENAI_MODEL": "stub-model"})
	e := realEnv(t, t.TempDir(), berth.AgentSpec{Name: "qwen", Command: command, Args: []string{"--acp", "--approval-mode", "default"},
		Env: env, HomeFiles: []string{".qwen/"}})
	realTurns(t, e, "qwen", t.TempDir(), "stub: hello there", "stub: hello again")
}

// Gemini CLI with its own stand-in, --fake-responses (a file of the
// model's answers, in order; each start reads it from the top): create →
// active → a prompt → end_turn; a write turn that asks permission,
// approved through the API; stop, resume, another turn.
func TestRealGeminiBwrap(t *testing.T) {
	t.Parallel()
	command := realAgent(t, "gemini")
	ws := t.TempDir()
	const answer = `{"method":"generateContentStream","response":[{"candidates":[{"content":{"role":"model","parts":[%s]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":5,"totalTokenCount":10}}]}` + "\n"
	target := filepath.Join(ws, "gemini.txt")
	fake := fmt.Sprintf(answer, `{"text":"fake gemini says hi"}`) +
		fmt.Sprintf(answer, fmt.Sprintf(`{"functionCall":{"name":"write_file","args":{"file_path":%q,"content":"made by gemini"}}}`, target)) +
		fmt.Sprintf(answer, `{"text":"wrote it"}`)
	// Gemini CLI 0.61 cannot create a file through a client's fs methods:
	// it takes the JSON-RPC error object for fs/read_text_file's "not
	// found" as a failure (normalizeFileSystemError reads String(err),
	// "[object Object]", as no ENOENT), so the write is of a file there.
	testenv.WriteFile(t, target, "old", 0o644)
	// In the workspace: the sandbox sees nothing else of the host's.
	responses := filepath.Join(ws, ".fake", "responses.jsonl")
	testenv.WriteFile(t, responses, fake, 0o644)
	e := realEnv(t, t.TempDir(), berth.AgentSpec{Name: "gemini", Command: command,
		Args: []string{"--acp", "--model", "gemini-2.5-flash", "--fake-responses", responses},
		Env:  map[string]string{"GEMINI_API_KEY": "fake"}, HomeFiles: []string{".gemini/"}})
	realTurns(t, e, "gemini", ws, "fake gemini says hi", "fake gemini says hi")
}

// Claude Code's ACP adapter with no credentials: under bwrap it starts
// (active), and a prompt ends with auth_required, the badge needs_auth.
// The adapter lists auth methods only to a client that says it can run
// a login in a terminal (clientCapabilities.auth.terminal), which berth
// does not: acp.auth_methods is empty.
func TestRealClaudeNeedsAuthBwrap(t *testing.T) {
	t.Parallel()
	command := realAgent(t, "claude-agent-acp")
	e := realEnv(t, t.TempDir(), berth.AgentSpec{Name: "claude", Command: command,
		Env: map[string]string{"DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}})
	s := e.create(berth.CreateRequest{Agent: "claude", Workspace: t.TempDir()})
	wantActive(t, e, s.ID)
	res := e.realPrompt(s.ID, "hello")
	if res.StopReason != berth.TurnError || res.Error == nil || res.Error.Code != "auth_required" {
		t.Fatalf("turn: %+v; stderr: %s", res, stderrOf(e, s.ID))
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Badge != berth.BadgeNeedsAuth {
		t.Errorf("badge %s, want needs_auth", got.Badge)
	}
	if string(got.ACP.AuthMethods) != "[]" {
		t.Errorf("acp: %+v", got.ACP)
	}
}

// Real agents run their whole turns through the model gateway: the
// stand-in listens on the host's loopback, where the sandbox (bwrap, no
// network) never reaches; the agent is given the gateway on its own
// loopback and a placeholder key; the upstream sees the stored credential
// alone, across a stop and a resume; every call is counted. Codex and
// OpenCode run as the built-in catalog entries have them, in
// approve-reads: pointed at the gateway through their own configuration
// (model_env), Codex put in its asking mode, OpenCode asking before an
// edit.
func TestRealAgentsThroughTheGateway(t *testing.T) {
	// Not parallel: the gateway's env sets the daemon's environment.
	claude := realAgent(t, "claude-agent-acp")
	qwen := realAgent(t, "qwen")
	gemini := realAgent(t, "gemini")
	codexACP := realAgent(t, "codex-acp")
	opencode := realAgent(t, "opencode")
	cat, err := config.Default().Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	builtin := func(name string) berth.AgentSpec {
		a, _ := cat.Get(name)
		return a
	}
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	user := t.TempDir()
	testenv.WriteFile(t, filepath.Join(user, ".claude/settings.json"), `{"permissions":{"defaultMode":"default"}}`, 0o600)
	// Nothing serves the sandbox's own stub address: only the gateway
	// answers the agents.
	onlyGateway := func(env map[string]string) map[string]string {
		env = stubbedEnv(t, env)
		delete(env, stubAddrEnv)
		return env
	}
	self, _ := os.Executable()
	ge := newGatewayEnv(t, shortRunDir(t), func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.Berth = self
		o.UserHome = user
		o.Limits.HandshakeTimeout = 2 * time.Minute
		c := o.Catalog.(testCatalog)
		c["claude"] = berth.AgentSpec{Name: "claude", Command: claude, ModelAPI: "anthropic",
			Env:       onlyGateway(map[string]string{"DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}),
			HomeFiles: []string{".claude/settings.json", ".claude.json"}}
		c["qwen"] = berth.AgentSpec{Name: "qwen", Command: qwen, Args: []string{"--acp", "--approval-mode", "default"},
			ModelAPI: "openai", Env: onlyGateway(map[string]string{"OPENAI_MODEL": "stub-model"}), HomeFiles: []string{".qwen/"}}
		c["gemini"] = berth.AgentSpec{Name: "gemini", Command: gemini, Args: []string{"--acp", "--model", "gemini-2.5-flash"},
			ModelAPI: "gemini", Env: onlyGateway(map[string]string{}), HomeFiles: []string{".gemini/"}}
		// The built-ins, run from the test's prefix, with no network (the
		// built-ins have it).
		codex := builtin("codex")
		codex.Command, codex.Args, codex.Env, codex.Network = codexACP, nil, onlyGateway(map[string]string{}), false
		c["codex"] = codex
		oc := builtin("opencode")
		// Nothing of its own it would fetch: models, updates, LSPs,
		// plugins (the sandbox has no network; they would fail slowly).
		ocEnv := map[string]string{}
		maps.Copy(ocEnv, oc.Env)
		oc.Command, oc.Env, oc.Network = opencode, onlyGateway(ocEnv), false
		for _, k := range []string{"MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS"} {
			oc.Env["OPENCODE_DISABLE_"+k] = "1"
		}
		c["opencode"] = oc
	})
	for agent, key := range map[string]string{"claude": "sk-real-key|", "qwen": "|Bearer sk-real-openai", "gemini": "real-gemini-key|",
		"codex": "|Bearer sk-real-openai", "opencode": "|Bearer sk-real-openai"} {
		t.Run(agent, func(t *testing.T) {
			before, _ := ge.seen.all()
			ws := t.TempDir()
			if agent == "gemini" {
				// Gemini CLI writes only a file that is there (see
				// TestRealGeminiBwrap).
				testenv.WriteFile(t, filepath.Join(ws, "gemini.txt"), "old", 0o644)
			}
			if agent == "opencode" {
				// OpenCode names the file it writes through the client
				// relative to its worktree: the repository's root, "/"
				// outside one (docs/agents.md).
				if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v: %s", err, out)
				}
			}
			perm := berth.PermAsk
			if agent == "codex" || agent == "opencode" {
				perm = berth.PermApproveReads
			}
			realTurnsIn(t, ge.env, perm, agent, ws, "stub: hello there", "stub: hello again")
			// The other agent's late calls (a title, a summary) may land
			// here too: each call carries a stored credential, never a
			// placeholder, and this agent's carry its upstream's.
			keys, _ := ge.seen.all()
			ours := 0
			for _, k := range keys[len(before):] {
				if k != "sk-real-key|" && k != "|Bearer sk-real-openai" && k != "real-gemini-key|" {
					t.Fatalf("the upstream saw keys %q, want the stored credentials alone", keys[len(before):])
				}
				if k == key {
					ours++
				}
			}
			if ours == 0 {
				t.Fatalf("the upstream saw no call with %q: %q", key, keys[len(before):])
			}
			// Counted once each answer has ended: the count may trail a turn.
			var id string
			waitFor(t, "the calls counted", func() bool {
				list, err := ge.m.ListSessions(context.Background(), berth.SessionFilter{Agent: agent})
				if err != nil || len(list.Sessions) != 1 {
					t.Fatalf("sessions: %+v, %v", list, err)
				}
				u := list.Sessions[0].Usage
				id = list.Sessions[0].ID
				return u.ModelCalls > 0 && u.InputTokens > 0 && u.OutputTokens > 0
			})
			if agent == "opencode" {
				// Its write came through berth, at the path it meant.
				w := eventData[map[string]any](ge.env, id, berth.EventFileWritten)
				if len(w) != 1 || w[0]["path"] != "opencode.txt" {
					t.Fatalf("file_written %v, want opencode.txt's", w)
				}
			}
		})
	}
}
