package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/gateway/relay"
	"github.com/berth-sh/berth/internal/modelstub"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// memCreds are credentials in memory, set and removed by the test.
type memCreds struct {
	mu   sync.Mutex
	vals map[string]string
}

func (c *memCreds) Credential(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.vals[name]; ok {
		return v, nil
	}
	return "", berth.Errorf(berth.ENotFound, "credential %q is not set", name)
}

func (c *memCreds) set(name, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if value == "" {
		delete(c.vals, name)
		return
	}
	c.vals[name] = value
}

// lateSessions is the manager as the gateway's Sessions, once it exists.
type lateSessions struct {
	s atomic.Pointer[gateway.Sessions]
}

func (l *lateSessions) Admit(ctx context.Context, id, up string) error {
	return (*l.s.Load()).Admit(ctx, id, up)
}
func (l *lateSessions) Called(id string, c gateway.Call) { (*l.s.Load()).Called(id, c) }
func (l *lateSessions) Missing(id, cred string)          { (*l.s.Load()).Missing(id, cred) }

// seenCalls records the key headers and paths the upstream was sent.
type seenCalls struct {
	mu    sync.Mutex
	keys  []string
	paths []string
}

func (s *seenCalls) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get("X-Api-Key")+r.Header.Get("X-Goog-Api-Key")+"|"+r.Header.Get("Authorization"))
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (s *seenCalls) all() (keys, paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]string(nil), s.paths...)
}

// gatewayEnv is a manager whose agents are pointed at a model gateway on
// a loopback port, in front of the model stub.
type gatewayEnv struct {
	*env
	creds *memCreds
	seen  *seenCalls
	gw    *gateway.Gateway
	url   string
	late  *lateSessions
	// opts are the manager's options (a reopened one's too).
	opts func(*Options)
}

// tellManager makes the manager the gateway's sessions.
func (ge *gatewayEnv) tellManager() {
	gs := ge.m.GatewaySessions()
	ge.late.s.Store(&gs)
}

// restart shuts the manager down leaving its agents in their shims, as
// berth serve does, and opens the next one with a gateway that has
// forgotten every key, as a new daemon's has.
func (ge *gatewayEnv) restart(ids ...string) {
	ge.t.Helper()
	ctx, done := ge.bound("shut the manager down for a restart")
	defer done()
	if err := ge.m.Shutdown(ctx, false); err != nil {
		ge.t.Fatal(err)
	}
	for _, id := range ids {
		ge.gw.Unregister(id)
	}
	if err := ge.log.Close(ctx); err != nil {
		ge.t.Fatal(err)
	}
	if err := ge.store.Close(); err != nil {
		ge.t.Fatal(err)
	}
	done()
	ge.open(withShims(ge.home), ge.opts)
	ge.tellManager()
}

// newGatewayEnv starts the stub, the gateway (upstreams anthropic,
// openai and gemini, and other: the stub under /other) and the manager; the catalog has
// demo-model, the demo agent calling the Anthropic API, which the daemon's
// environment would give a real key (ANTHROPIC_API_KEY).
func newGatewayEnv(t *testing.T, tweak ...func(*Options)) *gatewayEnv {
	t.Setenv("ANTHROPIC_API_KEY", "sk-daemon-env-key")
	ge := &gatewayEnv{creds: &memCreds{vals: map[string]string{"anthropic": "sk-real-key", "openai": "sk-real-openai", "gemini": "real-gemini-key"}}, seen: &seenCalls{}}
	stub := httptest.NewServer(ge.seen.wrap(&modelstub.Server{}))
	t.Cleanup(stub.Close)
	table, err := gateway.Resolve([]gateway.Upstream{{Name: "anthropic", Kind: gateway.KindAnthropic, URL: stub.URL},
		{Name: "other", Kind: gateway.KindAnthropic, URL: stub.URL + "/other", Credential: "anthropic"},
		{Name: "openai", Kind: gateway.KindOpenAI, URL: stub.URL},
		{Name: "gemini", Kind: gateway.KindGemini, URL: stub.URL}})
	if err != nil {
		t.Fatal(err)
	}
	late := &lateSessions{}
	ge.gw, err = gateway.New(gateway.Options{Upstreams: table, Credentials: ge.creds, Sessions: late})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ge.gw)
	t.Cleanup(func() {
		srv.Close()
		_ = ge.gw.Close(context.Background())
	})
	ge.url = srv.URL
	self, _ := os.Executable()
	ge.late = late
	ge.opts = func(o *Options) {
		c := catalog()
		c["demo-model"] = berth.AgentSpec{Name: "demo-model", Command: self, Env: map[string]string{agentEnvVar: "demo"},
			PassEnv: []string{"ANTHROPIC_API_KEY"}, ModelAPI: "anthropic"}
		o.Catalog = c
		o.Models = &ModelGateway{Gateway: ge.gw, HostURL: srv.URL}
		for _, f := range tweak {
			f(o)
		}
	}
	ge.env = newEnv(t, ge.opts)
	ge.tellManager()
	return ge
}

// call calls the gateway as an agent would, with key.
func (ge *gatewayEnv) call(key string) int {
	ge.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ge.url+"/anthropic/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ge.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A host-sandbox agent is given the gateway's URL and its session's key
// (never the daemon's own key): its call reaches the upstream with the
// real credential; a call without the key, or with the key of a stopped
// session, is a 401.
func TestModelGatewayHostSession(t *testing.T) {
	ge := newGatewayEnv(t)
	s := ge.create(berth.CreateRequest{Agent: "demo-model"})
	if got := ge.prompt(s.ID, "llm hello there").Text; got != "llm: 200 stub: hello there" {
		t.Fatalf("the agent's model call: %q", got)
	}
	keys, paths := ge.seen.all()
	if len(keys) != 1 || keys[0] != "sk-real-key|" || paths[0] != "/v1/messages" {
		t.Fatalf("the upstream saw keys %q at %q, want the real key alone", keys, paths)
	}
	key := ge.m.models.key(s.ID)
	if !strings.HasPrefix(key, "berth-gw-") {
		t.Fatalf("key %q", key)
	}
	if st := ge.call(""); st != http.StatusUnauthorized {
		t.Fatalf("a call without a key: %d", st)
	}
	if st := ge.call(key); st != http.StatusOK {
		t.Fatalf("a call with the session's key: %d", st)
	}
	if _, err := ge.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	if st := ge.call(key); st != http.StatusUnauthorized {
		t.Fatalf("a call with the key of a stopped session: %d", st)
	}
}

// An agent that outlives its daemon keeps the key and the URL it was
// given, and the next daemon honours them: on the host's loopback port,
// and, under bwrap, through its relay to the socket served again.
func TestModelGatewayAfterRestart(t *testing.T) {
	for _, box := range []string{berth.SandboxHost, berth.SandboxBwrap} {
		t.Run(box, func(t *testing.T) {
			var tweak []func(*Options)
			if box == berth.SandboxBwrap {
				p := bwrap.New(bwrap.Options{})
				if err := p.Probe(context.Background()); err != nil {
					testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
				}
				self, _ := os.Executable()
				tweak = append(tweak, func(o *Options) { o.Providers, o.Berth = append(o.Providers, p), self })
			}
			ge := newGatewayEnv(t, tweak...)
			ge.close()
			ge.open(withShims(ge.home), ge.opts)
			ge.tellManager()
			s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: box})
			if got := ge.prompt(s.ID, "llm one").Text; got != "llm: 200 stub: one" {
				t.Fatalf("before the restart: %q", got)
			}
			pid := ge.agentPID(s.ID)
			ge.restart(s.ID)
			if processGone(pid) {
				t.Fatal("the agent died with the manager")
			}
			if got := ge.prompt(s.ID, "llm two").Text; got != "llm: 200 stub: two" {
				t.Fatalf("after the restart: %q", got)
			}
			ge.closeAndWaitShims(s.ID)
		})
	}
}

// A session's models picks another upstream of the agent's kind; one that
// is missing or of another kind is refused, naming the field.
func TestModelGatewayModelsOnCreate(t *testing.T) {
	ge := newGatewayEnv(t)
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Models: map[string]string{"anthropic": "other"}})
	if got := ge.prompt(s.ID, "llm hi").Text; got != "llm: 200 stub: hi" {
		t.Fatalf("the agent's model call: %q", got)
	}
	if _, paths := ge.seen.all(); len(paths) != 1 || paths[0] != "/other/v1/messages" {
		t.Fatalf("the upstream saw %q, want the other upstream's path", paths)
	}
	if got, _ := ge.m.GetSession(context.Background(), s.ID); got.Models["anthropic"] != "other" {
		t.Fatalf("models = %v", got.Models)
	}
	// A child that picks none calls its parent's.
	kid := ge.spawn(s.ID, berth.CreateRequest{Agent: "demo-model", TTLSeconds: 60})
	if kid.Models["anthropic"] != "other" {
		t.Fatalf("the child's models = %v", kid.Models)
	}
	if got := ge.prompt(kid.ID, "llm kid").Text; got != "llm: 200 stub: kid" {
		t.Fatalf("the child's model call: %q", got)
	}
	if _, paths := ge.seen.all(); len(paths) != 2 || paths[1] != "/other/v1/messages" {
		t.Fatalf("the upstream saw %q, want the child's call on the other upstream's path", paths)
	}
	for models, field := range map[string]string{"anthropic=nope": "models.anthropic", "anthropic=openai": "models.anthropic",
		"claude=anthropic": "models.claude"} {
		k, v, _ := strings.Cut(models, "=")
		_, err := ge.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo-model", Models: map[string]string{k: v}})
		var be *berth.Error
		if !errors.As(err, &be) || be.Code != berth.EInvalid || be.Details["field"] != field || !strings.HasPrefix(be.Message, field) {
			t.Errorf("models %s: %v, want EInvalid naming %s", models, err, field)
		}
	}
}

// A call refused for a credential not set says how to set it, and the
// session shows needs_auth with auth.missing; once the credential is set
// the next call works and the badge clears, with no restart.
func TestModelGatewayMissingCredential(t *testing.T) {
	ge := newGatewayEnv(t)
	ge.creds.set("anthropic", "")
	s := ge.create(berth.CreateRequest{Agent: "demo-model"})
	got := ge.prompt(s.ID, "llm hello").Text
	if !strings.HasPrefix(got, "llm: 401 ") || !strings.Contains(got, "berth credentials set anthropic") {
		t.Fatalf("the agent's call without a credential: %q", got)
	}
	v, err := ge.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Badge != berth.BadgeNeedsAuth || v.Auth == nil || v.Auth.Missing != "anthropic" {
		t.Fatalf("badge %s, auth %+v: want needs_auth, missing anthropic", v.Badge, v.Auth)
	}
	warned := false
	for _, w := range eventData[map[string]any](ge.env, s.ID, berth.EventRuntimeWarning) {
		warned = warned || w["credential"] == "anthropic" && strings.Contains(w["reason"].(string), "berth credentials set anthropic")
	}
	if !warned {
		t.Fatal("no runtime_warning says how to set the credential")
	}
	if keys, _ := ge.seen.all(); len(keys) != 0 {
		t.Fatalf("the upstream was called: %q", keys)
	}
	ge.creds.set("anthropic", "sk-set-later")
	if got := ge.prompt(s.ID, "llm again").Text; got != "llm: 200 stub: again" {
		t.Fatalf("after the credential is set: %q", got)
	}
	waitFor(t, "the badge to clear", func() bool {
		v, err := ge.m.GetSession(context.Background(), s.ID)
		return err == nil && v.Auth == nil && v.Badge == berth.BadgeIdle
	})
}

// An agent pointed at the gateway inherits none of the daemon's model
// credentials, even those the gateway does not replace; one that is not
// still inherits what it declares.
func TestAgentEnvWithoutDaemonCredentials(t *testing.T) {
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat-daemon")
	t.Setenv("ANTHROPIC_API_KEY", "sk-daemon")
	spec := berth.AgentSpec{Name: "a", PassEnv: []string{"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY"}, ModelAPI: "anthropic"}
	gw := gateway.AgentEnv(gateway.KindAnthropic, "http://127.0.0.1:1/anthropic", "berth-gw-x")
	env := agentEnv(spec, "ses_1", nil, gw)
	if _, ok := env["CLAUDE_CODE_OAUTH_TOKEN"]; ok || env["ANTHROPIC_API_KEY"] != "berth-gw-x" {
		t.Fatalf("env = %v", env)
	}
	if env := agentEnv(spec, "ses_1", nil, nil); env["CLAUDE_CODE_OAUTH_TOKEN"] != "sk-ant-oat-daemon" {
		t.Fatalf("without the gateway: env = %v", env)
	}
}

// runRelay is `berth agent-exec` in this test binary: --gateway-listen
// ADDR --gateway-socket PATH -- PROGRAM ARGS….
func runRelay(args []string) int {
	o := relay.Options{Stderr: os.Stderr}
	for len(args) > 0 && args[0] != "--" {
		if len(args) < 2 {
			return 2
		}
		switch args[0] {
		case "--gateway-listen":
			o.Listen = args[1]
		case "--gateway-socket":
			o.Socket = args[1]
		case "--egress-listen":
			o.EgressListen = args[1]
		case "--egress-socket":
			o.EgressSocket = args[1]
		}
		args = args[2:]
	}
	if len(args) > 0 {
		o.Argv = args[1:]
	}
	return relay.Run(o)
}

// Under bwrap, with or without network, the agent calls the gateway on
// the sandbox's own loopback, through the relay and the session's socket:
// the call reaches the upstream with the real credential; the host's
// gateway port is not reachable from inside; once the session stops its
// socket's directory is gone.
func TestModelGatewayBwrap(t *testing.T) {
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	// The session with network runs slirp4netns.
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		testenv.Missing(t, "slirp4netns", "not installed (Debian package slirp4netns)")
	}
	self, _ := os.Executable()
	ge := newGatewayEnv(t, shortRunDir(t), func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.Berth = self
	})
	for _, network := range []bool{false, true} {
		s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, Network: berth.NetworkOf(network)})
		if s.Sandbox.Provider != berth.SandboxBwrap || s.Sandbox.Network != network {
			t.Fatalf("sandbox %+v, want bwrap with network %v", s.Sandbox, network)
		}
		seenBefore, _ := ge.seen.all()
		before := len(seenBefore)
		if got := ge.prompt(s.ID, "llm hello from the box").Text; got != "llm: 200 stub: hello from the box" {
			t.Fatalf("network %v: the agent's model call: %q", network, got)
		}
		if keys, _ := ge.seen.all(); len(keys) != before+1 || keys[before] != "sk-real-key|" {
			t.Fatalf("network %v: the upstream saw keys %q, want the real key alone", network, keys)
		}
		// The daemon's loopback port is not the sandbox's.
		res, err := ge.m.Exec(context.Background(), s.ID, berth.ExecRequest{
			Command: []string{"/usr/bin/busybox", "wget", "-q", "-T", "5", "-O", "-", ge.url + "/anthropic/v1/models"}})
		if err != nil || res.ExitCode == 0 {
			t.Fatalf("network %v: the host's gateway port from inside the sandbox: %+v, %v", network, res, err)
		}
		dir := ge.m.models.sockDir(s.ID)
		if _, err := os.Stat(filepath.Join(dir, relaySocket)); err != nil {
			t.Fatalf("the session's gateway socket: %v", err)
		}
		if _, err := ge.m.StopSession(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the gateway directory after the session stopped: %v", err)
		}
	}
}

// In an isolating sandbox the agent runs under berth agent-exec with the
// session's gateway directory bound at /run/berth-gw and the gateway's URL
// on the sandbox's loopback; berth's binary is bound where the sandbox
// would not see it (a container sees none of the host's system
// directories). On the host the agent runs as itself, pointed at the
// daemon's port.
func TestModelGatewayPlacement(t *testing.T) {
	gw, err := gateway.New(gateway.Options{Credentials: &memCreds{vals: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close(context.Background())
	var provs []berth.SandboxProvider
	for _, p := range capsProviders() {
		provs = append(provs, p)
	}
	const self = "/usr/local/bin/berth"
	m := New(Options{Providers: provs, Berth: self, Home: t.TempDir(),
		Models: &ModelGateway{Gateway: gw, HostURL: "http://127.0.0.1:7"}})
	spec := berth.AgentSpec{Name: "a", Command: "/opt/agent", Args: []string{"--acp"}, ModelAPI: "anthropic"}
	for _, c := range []struct {
		box       string
		url       string
		bindBerth bool
	}{
		{berth.SandboxHost, "http://127.0.0.1:7/anthropic", false},
		{berth.SandboxBwrap, "http://127.0.0.1:41400/anthropic", false},
		{berth.SandboxDocker, "http://127.0.0.1:41400/anthropic", true},
	} {
		s := &berth.Session{ID: "ses_" + c.box, Sandbox: berth.SandboxSpec{Provider: c.box}}
		cfg := m.place.sandboxConfig(s, spec)
		if cfg.Env["ANTHROPIC_BASE_URL"] != c.url || cfg.Env["ANTHROPIC_API_KEY"] != m.models.key(s.ID) {
			t.Errorf("%s: env %v", c.box, cfg.Env)
		}
		hasGW := slices.Contains(cfg.Binds, berth.Bind{Source: m.models.sockDir(s.ID), Target: relayDir})
		hasBerth := slices.Contains(cfg.Binds, berth.Bind{Source: self, Target: self})
		path, args, wrapped := m.models.wrap(s, spec, "/opt/agent")
		isolated := c.box != berth.SandboxHost
		if hasGW != isolated || hasBerth != c.bindBerth || wrapped != isolated {
			t.Errorf("%s: binds %+v, wrapped %v", c.box, cfg.Binds, wrapped)
		}
		if wrapped && (path != self || !slices.Equal(args, []string{"agent-exec", "--gateway-listen", relayAddr,
			"--gateway-socket", relayDir + "/" + relaySocket, "--", "/opt/agent", "--acp"})) {
			t.Errorf("%s: runs %s %q", c.box, path, args)
		}
	}
	// Two sessions never share a key.
	if m.models.key("ses_a") == m.models.key("ses_b") {
		t.Fatal("two sessions have one key")
	}
}

// A create whose store refuses the session leaves no key of its agent's
// behind.
func TestModelGatewayKeyOfASessionNotStored(t *testing.T) {
	ge := newGatewayEnv(t)
	ge.close()
	fail := &failingCreateStore{agentBound: 10 * time.Second}
	ge.wrap = func(st berth.Store) berth.Store { fail.Store = st; return fail }
	ge.open(withShims(ge.home), ge.opts)
	ge.tellManager()
	if _, err := ge.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo-model"}); err == nil {
		t.Fatal("the create succeeded")
	}
	if !fail.agentSeen {
		t.Fatal("the agent did not start while the session was stored")
	}
	if st := ge.call(ge.m.models.key(fail.id)); st != http.StatusUnauthorized {
		t.Fatalf("the key of the session not stored: %d", st)
	}
}

// A session's gateway socket serves maxModelConns connections at once: an
// agent that holds them all makes its next call wait, not the daemon run
// out of descriptors; one let go, the call is answered.
func TestModelGatewaySocketBoundsConnections(t *testing.T) {
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	self, _ := os.Executable()
	ge := newGatewayEnv(t, shortRunDir(t), func(o *Options) {
		o.Providers, o.Berth = append(o.Providers, p), self
	})
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap})
	sock := filepath.Join(ge.m.models.sockDir(s.ID), relaySocket)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxModelConns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+ge.m.models.key(s.ID)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	b := make([]byte, 12)
	if n, err := c.Read(b); err == nil {
		t.Fatalf("answered past the bound: %q", b[:n])
	}
	held[0].Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 ") {
		t.Fatalf("once a connection is let go: %q %v", b, err)
	}
}

// The agents list names, for each agent that calls a model API, the
// credential its default upstream needs and whether the store holds it
// (the web UI's New session form marks and picks agents by them); an
// agent that calls none names none.
func TestAgentsNameTheirCredential(t *testing.T) {
	ge := newGatewayEnv(t)
	ctx := context.Background()
	byName := func() map[string]berth.AgentInfo {
		t.Helper()
		agents, err := ge.m.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]berth.AgentInfo{}
		for _, a := range agents {
			out[a.Name] = a
		}
		return out
	}
	got := byName()
	if a := got["demo-model"]; a.ModelAPI != "anthropic" || a.Credential != "anthropic" || a.CredentialSet {
		t.Fatalf("demo-model before its credential is set: %+v", a)
	}
	for _, name := range []string{"demo"} {
		if a, ok := got[name]; !ok || a.ModelAPI != "" || a.Credential != "" || a.CredentialSet {
			t.Fatalf("%s: %+v (listed %v), want no model API and no credential", name, a, ok)
		}
	}
	if err := ge.store.PutCredential(ctx, "anthropic", "", []byte("sk-ant-0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	if a := byName()["demo-model"]; a.Credential != "anthropic" || !a.CredentialSet {
		t.Fatalf("demo-model once its credential is set: %+v", a)
	}
}

// An agent that reads its endpoint from its own configuration gets it
// pointed at the gateway by its catalog's model_env: the built-in Codex's
// model provider and OpenCode's config hold the session's gateway URL and
// placeholder key, never a credential; an agent the gateway does not
// serve gets none of them.
func TestModelGatewayModelEnv(t *testing.T) {
	ge := newGatewayEnv(t)
	cat, err := config.Default().Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	s := &berth.Session{ID: "ses_modelenv", Sandbox: berth.SandboxSpec{Provider: berth.SandboxHost}}
	key, url := ge.m.models.key(s.ID), ge.url+"/openai/v1"
	codex, _ := cat.Get("codex")
	env := ge.m.models.env(s, codex)
	var cc struct {
		Providers map[string]struct {
			BaseURL string `json:"base_url"`
			WireAPI string `json:"wire_api"`
			EnvKey  string `json:"env_key"`
		} `json:"model_providers"`
	}
	if err := json.Unmarshal([]byte(env["CODEX_CONFIG"]), &cc); err != nil {
		t.Fatalf("CODEX_CONFIG %q: %v", env["CODEX_CONFIG"], err)
	}
	p := cc.Providers[env["MODEL_PROVIDER"]]
	if p.BaseURL != url || p.WireAPI != "responses" || p.EnvKey != "OPENAI_API_KEY" || env["OPENAI_API_KEY"] != key {
		t.Fatalf("codex's provider %+v (MODEL_PROVIDER %q), OPENAI_API_KEY %q; want base_url %s and the key %s",
			p, env["MODEL_PROVIDER"], env["OPENAI_API_KEY"], url, key)
	}
	opencode, _ := cat.Get("opencode")
	env = ge.m.models.env(s, opencode)
	var oc struct {
		Enabled  []string `json:"enabled_providers"`
		Provider map[string]struct {
			Options struct{ BaseURL, APIKey string } `json:"options"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(env["OPENCODE_CONFIG_CONTENT"]), &oc); err != nil {
		t.Fatalf("OPENCODE_CONFIG_CONTENT %q: %v", env["OPENCODE_CONFIG_CONTENT"], err)
	}
	if o := oc.Provider["openai"].Options; o.BaseURL != url || o.APIKey != key || !slices.Equal(oc.Enabled, []string{"openai"}) {
		t.Fatalf("opencode's config %+v, want its openai provider alone at %s with the key %s", oc, url, key)
	}
	for k, v := range env {
		if strings.Contains(v, "sk-real") {
			t.Fatalf("%s holds a credential: %q", k, v)
		}
	}
	opencode.ModelAPI = berth.ModelAPINone
	if env := ge.m.models.env(s, opencode); env != nil {
		t.Fatalf("an agent not pointed at the gateway: %v", env)
	}
}
