package session

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// hostListener is an HTTP server on the host's loopback that answers its
// name, never on a port a sandbox's relay holds.
func hostListener(t *testing.T, name string) (*httptest.Server, string) {
	return testenv.Answering(t, name, relayAddr, egressAddr)
}

// askedName is a name the test's resolver gives a public address, which
// its dialer connects to a host listener: a question is never put about
// the host's own addresses.
const askedName = "asked.example"

// askedResolver resolves askedName, and every name under .example, to a
// documentation address.
type askedResolver struct{}

func (askedResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".example") {
		return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// askedDialer connects 203.0.113.7:80 to to.
type askedDialer struct{ to string }

func (d askedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if address == "203.0.113.7:80" {
		address = d.to
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// bwrapGatewayEnv is a gateway env whose sessions run under bwrap with
// this test binary as berth's.
func bwrapGatewayEnv(t *testing.T, tweak ...func(*Options)) *gatewayEnv {
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	self, _ := os.Executable()
	return newGatewayEnv(t, shortRunDir(t), func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
		o.Berth = self
		for _, f := range tweak {
			f(o)
		}
	})
}

// fetch has session id's agent GET url (through its HTTP_PROXY, or
// direct), and returns what it says: "fetch: STATUS BODY" or "fetch:
// error".
func (ge *gatewayEnv) fetch(id, how, url string) string {
	ge.t.Helper()
	return ge.prompt(id, how+" "+url).Text
}

// fetchAsync is fetch on a goroutine of its own, for a fetch the test
// answers a question of: its answer comes on the channel, and a failure
// of its turn fails the test there (awaitFetch) rather than ending the
// goroutine with the test waiting for it.
func (ge *gatewayEnv) fetchAsync(id, how, url string) <-chan fetched {
	out := make(chan fetched, 1)
	go func() {
		res, err := ge.tryPrompt(id, how+" "+url)
		out <- fetched{res, err}
	}()
	return out
}

// fetched is the outcome of a fetchAsync.
type fetched struct {
	res *berth.TurnResult
	err error
}

// awaitFetch is what the fetch of fetchAsync says; the test fails when
// its turn failed.
func (ge *gatewayEnv) awaitFetch(c <-chan fetched) string {
	ge.t.Helper()
	select {
	case f := <-c:
		if f.err != nil {
			ge.t.Fatal(f.err)
		}
		return f.res.Text
	case <-time.After(opBound):
		ge.t.Fatalf("a fetch's turn did not end within %s", opBound)
	}
	return ""
}

// deniedEvents are the (host:port) of session id's network_denied events.
func (ge *gatewayEnv) deniedEvents(id string) []string {
	var out []string
	for _, ev := range ge.events(id) {
		if ev.Type != berth.EventNetworkDenied {
			continue
		}
		var d struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			ge.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", d.Host, d.Port))
	}
	return out
}

// Under bwrap with an allow list naming one of two host listeners, the
// agent (its HTTP_PROXY set) reaches the listed one through the egress
// proxy and nothing else: the other is refused with a network_denied
// event, and a direct connection to either goes nowhere. Its model calls
// still reach the gateway. Under network:false the agent has no proxy and
// reaches neither.
func TestNetworkAllowListBwrap(t *testing.T) {
	ge := bwrapGatewayEnv(t)
	_, allowed := hostListener(t, "listed")
	_, other := hostListener(t, "unlisted")
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{allowed}}})
	if s.Sandbox.Network || s.Sandbox.NetworkPolicy == nil || !slices.Equal(s.Sandbox.NetworkPolicy.Allow, []string{allowed}) {
		t.Fatalf("sandbox %+v", s.Sandbox)
	}
	if got := ge.fetch(s.ID, "fetch", "http://"+allowed+"/"); got != "fetch: 200 listed" {
		t.Fatalf("the listed host through the proxy: %q", got)
	}
	if got := ge.fetch(s.ID, "fetch", "http://"+other+"/"); !strings.HasPrefix(got, "fetch: 403") {
		t.Fatalf("the unlisted host through the proxy: %q", got)
	}
	waitFor(t, "network_denied for the unlisted host", func() bool {
		return slices.Contains(ge.deniedEvents(s.ID), other)
	})
	for _, hp := range []string{allowed, other} {
		if got := ge.fetch(s.ID, "fetch-direct", "http://"+hp+"/"); got != "fetch: error" {
			t.Fatalf("a direct connection to %s: %q", hp, got)
		}
	}
	if got := ge.prompt(s.ID, "llm through the gateway").Text; got != "llm: 200 stub: through the gateway" {
		t.Fatalf("the agent's model call: %q", got)
	}

	none := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap})
	if none.Sandbox.NetworkPolicy != nil {
		t.Fatalf("network:false has a policy: %+v", none.Sandbox)
	}
	for _, how := range []string{"fetch", "fetch-direct"} {
		if got := ge.fetch(none.ID, how, "http://"+allowed+"/"); got != "fetch: error" {
			t.Fatalf("network:false, %s: %q", how, got)
		}
	}
	if got := ge.fetch(none.ID, "fetch-direct", "http://"+egressAddr+"/"); got != "fetch: error" {
		t.Fatalf("network:false reached the proxy's port: %q", got)
	}
}

// A command run through the exec API, or an agent's terminal, in a bwrap
// session with an allow list has the agent's way out and no other: curl
// (which follows the proxy variables as the agent does) reaches a listed
// host through the egress proxy, an unlisted one is refused 403 and
// logged network_denied, and a direct connection goes nowhere.
func TestNetworkAllowListExecBwrap(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.Missing(t, "curl", "no curl to run in the sandbox: %v", err)
	}
	_, to := hostListener(t, "listed")
	ge := bwrapGatewayEnv(t, func(o *Options) { o.Egress = egress.Options{Resolver: askedResolver{}, Dialer: askedDialer{to}} })
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{askedName}}})
	run := func(args ...string) *berth.ExecResult {
		t.Helper()
		res, err := ge.m.Exec(context.Background(), s.ID, berth.ExecRequest{Command: append([]string{curl, "-sS", "--max-time", "10"}, args...)})
		if err != nil {
			t.Fatalf("exec curl %v: %v", args, err)
		}
		return res
	}
	if res := run("http://" + askedName + "/"); res.ExitCode != 0 || res.Stdout != "listed" {
		t.Fatalf("exec: the listed host: %+v", res)
	}
	if res := run("-o", "/dev/null", "-w", "%{http_code}", "http://second.example/"); res.Stdout != "403" {
		t.Fatalf("exec: the unlisted host: %+v", res)
	}
	waitFor(t, "network_denied for the unlisted host", func() bool {
		return slices.Contains(ge.deniedEvents(s.ID), "second.example:80")
	})
	if res := run("--noproxy", "*", "http://"+to+"/"); res.ExitCode == 0 {
		t.Fatalf("exec: a direct connection: %+v", res)
	}
	// The agent's own terminals (terminal/create) run the same way.
	if got := ge.prompt(s.ID, "run "+curl+" -sS --max-time 10 http://"+askedName+"/").Text; !strings.Contains(got, "listed") {
		t.Fatalf("a terminal: %q", got)
	}
}

// With "ask": true, a host the list does not name becomes a pending
// permission request; allowed for the session, the connection goes
// through, the host is kept on the session's list, and the next
// connection goes through without a question.
func TestNetworkAskBwrap(t *testing.T) {
	_, listed := hostListener(t, "listed")
	_, to := hostListener(t, "asked")
	ge := bwrapGatewayEnv(t, func(o *Options) { o.Egress = egress.Options{Resolver: askedResolver{}, Dialer: askedDialer{to}} })
	asked := askedName + ":80"
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, PermissionMode: berth.PermApproveReads,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{listed}, Ask: true}})
	done := ge.fetchAsync(s.ID, "fetch", "http://"+askedName+"/")
	p := ge.pendingPermission(s.ID)
	if !strings.Contains(string(p.ToolCall), "connect to "+asked) {
		t.Fatalf("the question's tool call: %s", p.ToolCall)
	}
	if _, err := ge.m.DecidePermission(context.Background(), s.ID, p.ID, berth.PermissionDecision{OptionID: "allow_always"}); err != nil {
		t.Fatal(err)
	}
	if got := ge.awaitFetch(done); got != "fetch: 200 asked" {
		t.Fatalf("the asked host once allowed: %q", got)
	}
	waitFor(t, "the allowed host on the session's list", func() bool {
		got := ge.get(s.ID).Sandbox.NetworkPolicy
		return got != nil && slices.Equal(got.Allow, []string{listed, asked})
	})
	if got := ge.fetch(s.ID, "fetch", "http://"+askedName+"/"); got != "fetch: 200 asked" {
		t.Fatalf("the host allowed for the session, again: %q", got)
	}
	if ps, _ := ge.m.ListPermissions(context.Background(), s.ID, ""); len(ps) != 1 {
		t.Fatalf("%d permission requests, want the one", len(ps))
	}
	// The answer was about that host alone: another is asked about, and
	// rejected, refused.
	done = ge.fetchAsync(s.ID, "fetch", "http://second.example/")
	p = ge.pendingPermission(s.ID)
	if !strings.Contains(string(p.ToolCall), "connect to second.example:80") {
		t.Fatalf("the second question's tool call: %s", p.ToolCall)
	}
	if _, err := ge.m.DecidePermission(context.Background(), s.ID, p.ID, berth.PermissionDecision{OptionID: "reject_once"}); err != nil {
		t.Fatal(err)
	}
	if got := ge.awaitFetch(done); !strings.HasPrefix(got, "fetch: 403") {
		t.Fatalf("the rejected host: %q", got)
	}
}

// An allow list is refused, naming network, in a sandbox that cannot stop
// a direct connection (host), and on its own line an allow list under a
// parent without network is refused as any wider network is.
func TestNetworkAllowListNeedsIsolation(t *testing.T) {
	e := newEnv(t)
	allow := berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"api.github.com"}}
	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Network: allow})
	if code, what := errWhat(err); code != berth.EInvalid || what != "network" {
		t.Fatalf("an allow list on host: %v (%s %v), want invalid naming network", err, code, what)
	}
	root := e.create(berth.CreateRequest{})
	_, err = e.m.SpawnChild(context.Background(), root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, Network: allow}, "")
	if code, what := errWhat(err); code != berth.EForbidden || what != "network" {
		t.Fatalf("an allow list under a parent without network: %v (%s %v)", err, code, what)
	}
}

// A child of a session with an allow list may have a narrower one, or
// none; one naming a host its parent's does not, or asking when its
// parent does not, or the open network, is refused 403 naming network.
func TestSpawnChildNetworkAllowList(t *testing.T) {
	ge := bwrapGatewayEnv(t)
	parent := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"*.example.com", "127.0.0.1:8080"}}})
	for _, wide := range []berth.NetworkPolicy{
		{Mode: berth.NetworkOpen},
		{Mode: berth.NetworkAllowList, Allow: []string{"api.github.com"}},
		{Mode: berth.NetworkAllowList, Allow: []string{"127.0.0.1:8081"}},
		{Mode: berth.NetworkAllowList, Allow: []string{"a.example.com"}, Ask: true},
	} {
		_, err := ge.m.SpawnChild(context.Background(), parent.ID, berth.CreateRequest{Agent: "demo-model", TTLSeconds: 60, Network: wide}, "")
		if code, what := errWhat(err); code != berth.EForbidden || what != "network" {
			t.Errorf("child %+v: %v (%s %v), want permission_denied naming network", wide, err, code, what)
		}
	}
	kid := ge.spawn(parent.ID, berth.CreateRequest{Agent: "demo-model",
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"a.example.com"}}})
	if p := kid.Sandbox.NetworkPolicy; p == nil || !slices.Equal(p.Allow, []string{"a.example.com"}) || kid.Sandbox.Network {
		t.Fatalf("the narrower child's sandbox: %+v", kid.Sandbox)
	}
}

// spawn_child (the berth tools) takes an allow list as the children route
// does and narrows it the same way: a narrower list, asking where the
// parent asks, is the child's; a host the parent's list does not cover,
// the open network, or asking where the parent does not is 403 naming
// network, so an agent cannot widen its own policy through a child.
func TestSpawnChildToolNetworkAllowList(t *testing.T) {
	ge := bwrapGatewayEnv(t)
	ctx := context.Background()
	list := func(ask bool, hosts ...string) berth.NetworkPolicy {
		return berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: hosts, Ask: ask}
	}
	parent := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, Network: list(false, "*.example.com", "127.0.0.1:8080")})
	tools := &childTools{m: ge.m, id: parent.ID}
	for _, wide := range []berth.NetworkPolicy{{Mode: berth.NetworkOpen}, list(false, "api.github.com"), list(false, "127.0.0.1:8081"), list(true, "a.example.com")} {
		_, err := tools.SpawnChild(ctx, berth.SpawnChildArgs{TTLSeconds: 60, Network: wide})
		if code, what := errWhat(err); code != berth.EForbidden || what != "network" {
			t.Errorf("spawn_child with %+v: %v (%s %v), want permission_denied naming network", wide, err, code, what)
		}
	}
	res, err := tools.SpawnChild(ctx, berth.SpawnChildArgs{TTLSeconds: 60, Network: list(false, "a.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	kid := ge.get(res.ChildID)
	if p := kid.Sandbox.NetworkPolicy; p == nil || !slices.Equal(p.Allow, []string{"a.example.com"}) || p.Ask || kid.Sandbox.Network {
		t.Fatalf("the narrower child's sandbox: %+v", kid.Sandbox)
	}
	// Under a parent that asks, a child may ask too.
	asking := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, Network: list(true, "*.example.com")})
	res, err = (&childTools{m: ge.m, id: asking.ID}).SpawnChild(ctx, berth.SpawnChildArgs{TTLSeconds: 60, Network: list(true, "b.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if p := ge.get(res.ChildID).Sandbox.NetworkPolicy; p == nil || !slices.Equal(p.Allow, []string{"b.example.com"}) || !p.Ask {
		t.Fatalf("the asking child's policy: %+v", p)
	}
}

// The agent's egress proxy outlives a daemon restart: the next daemon
// serves its socket again, with the hosts a question allowed for the
// session (a question asked again would time out and refuse).
func TestNetworkAllowListRestart(t *testing.T) {
	_, listed := hostListener(t, "listed")
	_, to := hostListener(t, "asked")
	ge := bwrapGatewayEnv(t, func(o *Options) {
		o.Egress = egress.Options{Resolver: askedResolver{}, Dialer: askedDialer{to}}
		o.Limits.PermissionTimeout = 3 * time.Second
	})
	ge.close()
	ge.open(withShims(ge.home), ge.opts)
	ge.tellManager()
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, PermissionMode: berth.PermAsk,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{listed}, Ask: true}})
	done := ge.fetchAsync(s.ID, "fetch", "http://"+askedName+"/")
	p := ge.pendingPermission(s.ID)
	if _, err := ge.m.DecidePermission(context.Background(), s.ID, p.ID, berth.PermissionDecision{OptionID: "allow_always"}); err != nil {
		t.Fatal(err)
	}
	if got := ge.awaitFetch(done); got != "fetch: 200 asked" {
		t.Fatalf("before the restart: %q", got)
	}
	pid := ge.agentPID(s.ID)
	ge.restart(s.ID)
	if processGone(pid) {
		t.Fatal("the agent died with the manager")
	}
	for _, c := range []struct{ url, want string }{
		{"http://" + listed + "/", "fetch: 200 listed"},
		{"http://" + askedName + "/", "fetch: 200 asked"},
	} {
		if got := ge.fetch(s.ID, "fetch", c.url); got != c.want {
			t.Fatalf("after the restart, %s: %q", c.url, got)
		}
	}
	if ps, _ := ge.m.ListPermissions(context.Background(), s.ID, ""); len(ps) != 1 {
		t.Fatalf("%d permission requests, want the one before the restart", len(ps))
	}
	// An exec beside the reattached agent goes out the same way.
	if curl, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl", "no curl to run in the sandbox: %v", err)
	} else if res, err := ge.m.Exec(context.Background(), s.ID, berth.ExecRequest{Command: []string{curl, "-sS", "--max-time", "10", "http://" + askedName + "/"}}); err != nil || res.Stdout != "asked" {
		t.Fatalf("after the restart, exec curl: %+v %v", res, err)
	}
	ge.closeAndWaitShims(s.ID)
}

// [sandbox] network as an allow list is the network of the sessions that
// do not ask for one where a sandbox can enforce it; on host they run
// without network.
func TestNetworkAllowListDefault(t *testing.T) {
	def := berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"api.github.com"}}
	ge := bwrapGatewayEnv(t, func(o *Options) { o.Sandbox.Network = def })
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap})
	if p := s.Sandbox.NetworkPolicy; p == nil || !slices.Equal(p.Allow, def.Allow) || s.Sandbox.Network {
		t.Fatalf("under bwrap: %+v", s.Sandbox)
	}
	open := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap, Network: berth.NetworkOf(true)})
	if !open.Sandbox.Network || open.Sandbox.NetworkPolicy != nil {
		t.Fatalf("asking for the open network: %+v", open.Sandbox)
	}
	host := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxHost})
	if host.Sandbox.Network || host.Sandbox.NetworkPolicy != nil {
		t.Fatalf("on host: %+v", host.Sandbox)
	}
}

// A session with an allow list in bwrap or docker runs its agent under
// berth agent-exec with the egress port and socket, its gateway
// directory bound, and every proxy variable at the egress port (the
// gateway's loopback excepted), over the session's own; one without an
// allow list has none of it, nor does an agent that calls no model get
// the gateway's port.
func TestNetworkAllowListPlacement(t *testing.T) {
	var provs []berth.SandboxProvider
	for _, p := range capsProviders() {
		provs = append(provs, p)
	}
	const self = "/usr/local/bin/berth"
	m := New(Options{Providers: provs, Berth: self, Home: t.TempDir()})
	spec := berth.AgentSpec{Name: "a", Command: "/opt/agent", Args: []string{"--acp"}}
	allow := &berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"api.github.com"}}
	for _, box := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		s := &berth.Session{ID: "ses_" + box, Env: map[string]string{"HTTPS_PROXY": "http://evil.example"},
			Sandbox: berth.SandboxSpec{Provider: box, NetworkPolicy: allow}}
		cfg := m.place.sandboxConfig(s, spec)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			if cfg.Env[k] != "http://127.0.0.1:41401" {
				t.Errorf("%s: %s = %q", box, k, cfg.Env[k])
			}
		}
		if cfg.Env["NO_PROXY"] != "127.0.0.1,localhost" || cfg.Network {
			t.Errorf("%s: NO_PROXY %q, network %v", box, cfg.Env["NO_PROXY"], cfg.Network)
		}
		if !slices.Contains(cfg.Binds, berth.Bind{Source: m.models.sockDir(s.ID), Target: relayDir}) {
			t.Errorf("%s: binds %+v", box, cfg.Binds)
		}
		path, args, ok := m.models.wrap(s, spec, "/opt/agent")
		if !ok || path != self || !slices.Equal(args, []string{"agent-exec", "--gateway-listen", "", "--gateway-socket", "",
			"--egress-listen", egressAddr, "--egress-socket", relayDir + "/" + egressSocket, "--", "/opt/agent", "--acp"}) {
			t.Errorf("%s: runs %s %q (%v)", box, path, args, ok)
		}
		s.Sandbox.NetworkPolicy = nil
		if cfg := m.place.sandboxConfig(s, spec); cfg.Env["HTTPS_PROXY"] != "http://evil.example" || cfg.Env["HTTP_PROXY"] != "" {
			t.Errorf("%s without an allow list: env %v", box, cfg.Env)
		}
		if _, _, ok := m.models.wrap(s, spec, "/opt/agent"); ok {
			t.Errorf("%s without an allow list is wrapped", box)
		}
	}
}

// A network question asked outside a turn ends with the agent: the
// session stops at once, not when the question times out, and the
// question is answered with no decision.
func TestNetworkQuestionEndsWithTheAgent(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.PermissionTimeout = time.Minute })
	s := e.create(berth.CreateRequest{Agent: "demo", PermissionMode: berth.PermAsk})
	ls := e.m.set.liveOf(s.ID)
	if ls == nil {
		t.Fatal("no live session")
	}
	type answer struct {
		kind string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		kind, err := ls.AskConnect(context.Background(), "x.example", 443)
		done <- answer{kind, err}
	}()
	e.pendingPermission(s.ID)
	stopped := make(chan error, 1)
	go func() {
		_, err := e.m.StopSession(context.Background(), s.ID)
		stopped <- err
	}()
	var a answer
	var stopErr error
	gotAnswer, gotStop := false, false
	waitFor(t, "the stop and the question's end", func() bool {
		select {
		case a = <-done:
			gotAnswer = true
		case stopErr = <-stopped:
			gotStop = true
		default:
		}
		return gotAnswer && gotStop
	})
	if stopErr != nil || a.kind != "" {
		t.Fatalf("stop: %v; the question answered %q, %v", stopErr, a.kind, a.err)
	}
}

// A run directory too long for the egress proxy's socket does not leave
// the sandbox unable to start (its bind had no source): the session
// starts, says in its log why its agent reaches no host, and reaches none.
func TestNetworkAllowListWithNoSocketFailsClosed(t *testing.T) {
	_, to := hostListener(t, "listed")
	// Past what a Unix socket's path takes, once the session's
	// directory and the socket's name are added.
	long := filepath.Join(t.TempDir(), strings.Repeat("r", 70))
	ge := bwrapGatewayEnv(t, func(o *Options) {
		o.RunDir = long
		o.Egress = egress.Options{Resolver: askedResolver{}, Dialer: askedDialer{to}}
	})
	s := ge.create(berth.CreateRequest{Agent: "demo-model", Sandbox: berth.SandboxBwrap,
		Network: berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{askedName}}})
	if s.State != berth.StateActive {
		t.Fatalf("state %s, failure %+v", s.State, s.Failure)
	}
	var warned bool
	for _, ev := range ge.events(s.ID) {
		if ev.Type == berth.EventRuntimeWarning && strings.Contains(string(ev.Data), "reaches no host of its allow list") &&
			strings.Contains(string(ev.Data), "shorter BERTH_HOME") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no runtime_warning says why the agent reaches no host")
	}
	if got := ge.fetch(s.ID, "fetch", "http://"+askedName+"/"); got != "fetch: error" {
		t.Fatalf("the listed host with no proxy to reach: %q", got)
	}
}
