package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	bhttp "github.com/berth-sh/berth/http"
)

// withTools serves the berth tools with the API's handler.
func withTools(o *Options) {
	o.Berth = "/usr/bin/true"
	o.ToolsHandler = func(open berth.ToolsOpener) http.Handler { return bhttp.NewToolsHandler(open, 0, "test", nil) }
}

// shortRunDir puts the run directory, where the tools sockets are, at a
// short path of its own: under a test home named after a long test name, a
// socket's path is over the 107 bytes a Unix socket takes once TMPDIR is
// longer than /tmp (as in scripts/test's unprivileged pass).
func shortRunDir(t *testing.T) func(*Options) {
	dir, err := os.MkdirTemp("", "brun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return func(o *Options) { o.RunDir = dir }
}

// grantOf is the tools socket and credential session id's agent was given.
func (e *env) grantOf(id string) *toolsGrant {
	e.t.Helper()
	ls := e.m.set.liveOf(id)
	if ls == nil || ls.ToolsServer() == nil {
		e.t.Fatalf("session %s has no berth tools", id)
	}
	g := &toolsGrant{}
	for _, v := range ls.ToolsServer().Env {
		switch v.Name {
		case berth.ToolsSocketEnv:
			g.socket = v.Value
		case berth.ToolsTokenEnv:
			g.token = v.Value
		}
	}
	return g
}

// toolsCall lists the children over socket with token.
func toolsCall(socket, token string) error {
	c, err := bclient.New("unix:"+socket, bclient.WithToken(token))
	if err != nil {
		return err
	}
	defer c.Close()
	var out berth.ChildrenResult
	return c.CallTool(context.Background(), berth.ToolListChildren, struct{}{}, &out)
}

// A session's credential opens only its own socket, and only while the
// session runs: another session's credential, a wrong one and none are
// unauthenticated; once the session stops, its socket and directory are
// gone, its stored hash is cleared, and its credential is refused by the
// gate even where a socket of its is still served.
func TestToolsCredentialIsTheSessionsAndDiesWithIt(t *testing.T) {
	e := newEnv(t, withTools, shortRunDir(t))
	a := e.create(berth.CreateRequest{})
	b := e.create(berth.CreateRequest{})
	ga, gb := e.grantOf(a.ID), e.grantOf(b.ID)
	if err := toolsCall(ga.socket, ga.token); err != nil {
		t.Fatalf("A's own call: %v", err)
	}
	for name, token := range map[string]string{"B's": gb.token, "a wrong": ga.token + "x", "no": ""} {
		if err := toolsCall(ga.socket, token); !berth.IsCode(err, berth.EUnauthenticated) {
			t.Fatalf("%s credential on A's socket: %v", name, err)
		}
	}
	stored, err := e.store.GetSession(context.Background(), a.ID)
	if err != nil || stored.ToolsHash == "" || stored.ToolsHash == ga.token {
		t.Fatalf("stored tools hash %q (%v)", stored.ToolsHash, err)
	}

	// The gate's opener of A's socket, as it was while A ran.
	e.m.tools.mu.Lock()
	ts := e.m.tools.servers[a.ID]
	e.m.tools.mu.Unlock()
	open := e.m.tools.opener(a.ID, ts)
	if _, done, err := open(ga.token); err != nil {
		t.Fatalf("A's credential while A runs: %v", err)
	} else {
		done()
	}

	if _, err := e.m.StopSession(context.Background(), a.ID); err != nil {
		t.Fatal(err)
	}
	if err := toolsCall(ga.socket, ga.token); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("A's credential after A stopped: %v", err)
	}
	if _, err := os.Stat(e.m.tools.dir(a.ID)); !os.IsNotExist(err) {
		t.Fatalf("A's tools directory after it stopped: %v", err)
	}
	if _, _, err := open(ga.token); !berth.IsCode(err, berth.EUnauthenticated) {
		t.Fatalf("A's credential at the gate after A stopped: %v", err)
	}
	if stored, _ := e.store.GetSession(context.Background(), a.ID); stored.ToolsHash != "" {
		t.Fatalf("a stopped session keeps its tools hash %q", stored.ToolsHash)
	}
	if err := toolsCall(gb.socket, gb.token); err != nil {
		t.Fatalf("B's call after A stopped: %v", err)
	}
}

// A session's MCP stream (the upgrade `berth mcp` relays over) lives as
// long as the session: stopping it ends the stream, which the socket's
// HTTP server alone does not know of.
func TestAnMCPStreamEndsWithItsSession(t *testing.T) {
	e := newEnv(t, withTools, shortRunDir(t))
	s := e.create(berth.CreateRequest{})
	g := e.grantOf(s.ID)
	c, err := net.Dial("unix", g.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: berth\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: berth-mcp\r\n\r\n",
		berth.ToolsMCPPath, g.token)
	br := bufio.NewReader(c)
	if status, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 101 ") {
		t.Fatalf("the upgrade = %q, %v", status, err)
	}
	if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := br.ReadString('\n'); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream of a stopped session: %v, want its end", err)
			}
			break
		}
	}
}

// A manager without a tools handler gives no agent the berth tools, and
// a session created with berth_tools false gets none either.
func TestNoToolsWithoutHandlerOrWhenRefused(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	if ls := e.m.set.liveOf(s.ID); ls.ToolsServer() != nil {
		t.Fatal("a manager without a tools handler granted tools")
	}
	e2 := newEnv(t, withTools)
	no := false
	s = e2.create(berth.CreateRequest{BerthTools: &no})
	if ls := e2.m.set.liveOf(s.ID); ls.ToolsServer() != nil || s.BerthTools {
		t.Fatalf("berth_tools false: grant %v, session shows %v", ls.ToolsServer(), s.BerthTools)
	}
	if _, err := os.Stat(e2.m.tools.dir(s.ID)); !os.IsNotExist(err) {
		t.Fatalf("berth_tools false made a tools directory: %v", err)
	}
}

// A tools directory whose session is not live at boot (it stopped while
// no daemon ran) is removed when the manager opens.
func TestStaleToolsDirectoryRemovedAtBoot(t *testing.T) {
	e := newEnv(t, withTools)
	e.close()
	dir := filepath.Join(e.home, "run", "mcp-ses_gone")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(e.home, "run", "other")
	if err := os.MkdirAll(keep, 0o700); err != nil {
		t.Fatal(err)
	}
	e.open(withTools)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the stale tools directory is still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a directory not of the tools was removed: %v", err)
	}
}

// An agent cannot take the daemon's descriptors through its tools socket:
// of many connections that each send a request and then sit open, the
// daemon holds at most maxToolsConns (the rest wait in the backlog), and
// the session's own calls still work once they go.
func TestToolsSocketHoldsFewConnections(t *testing.T) {
	e := newEnv(t, withTools)
	s := e.create(berth.CreateRequest{})
	g := e.grantOf(s.ID)
	before := openFDs(t)
	const n = 100
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", g.socket)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// One whole request, kept alive afterwards: what an idle client holds.
		fmt.Fprintf(c, "POST /v1/tools/list_children HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	}
	// The daemon's side of the connections is what grows besides ours (n):
	// it takes its first maxToolsConns, then a window in which a server
	// without the bound would take the rest (it cannot make the test fail
	// wrongly, only pass on a server too slow to accept more).
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t)-before-n < maxToolsConns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if grown := openFDs(t) - before - n; grown > maxToolsConns+4 {
		t.Errorf("the daemon holds %d descriptors for %d connections to one tools socket, want at most %d", grown, n, maxToolsConns)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		err := toolsCall(g.socket, g.token)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's own call after the flood: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A daemon that reattaches to an agent serves its berth tools socket
// again, for the same credential, once its boot has reattached every
// session.
func TestToolsAreServedAgainAfterTheBoot(t *testing.T) {
	run := shortRunDir(t)
	e := newEnv(t)
	e.close()
	e.open(withShims(e.home), withTools, run)
	s := e.create(berth.CreateRequest{})
	g := e.grantOf(s.ID)
	if err := toolsCall(g.socket, g.token); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	e.detachAndReopen(withShims(e.home), withTools, run)
	select {
	case <-e.m.recovery.booted:
	case <-time.After(time.Minute):
		t.Fatal("the boot did not end")
	}
	if err := toolsCall(g.socket, g.token); err != nil {
		t.Fatalf("after the reattach: %v", err)
	}
	e.closeAndWaitShims(s.ID)
}

// A socket left to serve after the boot is not served when its session
// was revoked meanwhile (it stopped): no server, no directory.
func TestAToolsSocketRevokedDuringTheBootIsNotServed(t *testing.T) {
	e := newEnv(t, withTools, shortRunDir(t))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	g := e.grantOf(s.ID)
	stored, err := e.store.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	provider := e.m.providers[berth.SandboxHost]
	// As after a restart: nothing served yet, the socket left for later.
	e.m.tools.revoke(s.ID, false)
	e.m.tools.serveAfterBoot(s.ID, stored.ToolsHash, provider)
	if err := toolsCall(g.socket, g.token); err == nil {
		t.Fatal("the socket answered before the boot was over")
	}
	e.m.tools.revoke(s.ID, true)
	e.m.tools.servePending()
	e.m.tools.mu.Lock()
	served := e.m.tools.servers[s.ID]
	e.m.tools.mu.Unlock()
	if served != nil {
		t.Fatal("a revoked session's socket was served after the boot")
	}
	if _, err := os.Stat(e.m.tools.dir(s.ID)); !os.IsNotExist(err) {
		t.Fatalf("its tools directory: %v", err)
	}
	// Left for later and not revoked, it is served.
	e.m.tools.serveAfterBoot(s.ID, stored.ToolsHash, provider)
	e.m.tools.servePending()
	if err := toolsCall(g.socket, g.token); err != nil {
		t.Fatalf("served after the boot: %v", err)
	}
}

// The tools socket is served while the agent starts; one that cannot be
// served (here its path is longer than a Unix socket takes, though its
// directory could be made) leaves the agent without the berth tools: none
// in its MCP servers, no hash stored to serve again, and a
// runtime_warning saying why.
func TestToolsNotServedLeaveTheAgentWithout(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("r", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withTools, func(o *Options) { o.RunDir = long })
	s := e.create(berth.CreateRequest{})
	if s.State != berth.StateActive {
		t.Fatalf("state %s (%v)", s.State, s.Failure)
	}
	if ls := e.m.set.liveOf(s.ID); ls.ToolsServer() != nil {
		t.Errorf("the agent was given tools whose socket is not served: %+v", ls.ToolsServer())
	}
	if stored, _ := e.store.GetSession(context.Background(), s.ID); stored.ToolsHash != "" {
		t.Errorf("the stored tools hash is %q: a reattach would serve it", stored.ToolsHash)
	}
	warned := false
	for _, ev := range e.events(s.ID) {
		if ev.Type == berth.EventRuntimeWarning && strings.Contains(string(ev.Data), "berth MCP server is not available") {
			warned = true
		}
	}
	if !warned {
		t.Error("no runtime_warning says the agent has no berth tools")
	}
	if out := e.prompt(s.ID, "echo still works"); out.StopReason != "end_turn" {
		t.Errorf("a turn of the session without tools: %+v", out)
	}
}
