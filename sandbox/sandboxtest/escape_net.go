package sandboxtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// hostListener is a TCP service of the host that counts its connections.
type hostListener struct {
	ln       net.Listener
	accepted atomic.Int32
}

// port is the listener's port.
func (l *hostListener) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// listen starts a service on addr that greets each connection with
// greeting, or, when api is set, an HTTP server answering like the
// daemon's API. It stops when the test ends.
func listen(t *testing.T, addr, greeting string, api bool) *hostListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &hostListener{ln: ln}
	var wg sync.WaitGroup
	if api {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprintln(w, greeting)
		}), ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				l.accepted.Add(1)
			}
		}}
		wg.Go(func() { _ = srv.Serve(ln) })
		t.Cleanup(func() { _ = srv.Close(); wg.Wait() })
		return l
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			_, _ = c.Write([]byte(greeting + "\n"))
			_ = c.Close()
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return l
}

// hostAddrs are the host's non-loopback IPv4 addresses.
func hostAddrs() []string {
	var out []string
	ifaddrs, _ := net.InterfaceAddrs()
	for _, a := range ifaddrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// testNetworkLoopback: with Network true the sandbox reaches the outside
// (a service the host offers on its own non-loopback address, the
// control), but no service on the host's loopback: not the daemon's API,
// not another one, whatever address the sandbox tries (127.0.0.1, its
// default gateway, the user-mode networks' aliases of the host's
// loopback, the host's own addresses).
func testNetworkLoopback(t *testing.T, s *suite) {
	if s.opts.NoNetwork {
		t.Skip("the provider has no network on this host (Options.NoNetwork): the network escape case needs one")
	}
	outside := hostAddrs()
	if len(outside) == 0 {
		testenv.Missing(t, "a non-loopback IPv4 address", "the host has none: the control of the network escape case needs one")
	}
	api := listen(t, "127.0.0.1:0", "BERTH-API-ANSWERED", true)
	other := listen(t, "127.0.0.1:0", "LOOPBACK-SERVICE", false)
	control := listen(t, outside[0]+":0", "OUTSIDE-CONTROL", false)

	// 10.0.2.2 is slirp4netns's alias of the host, 10.0.2.3 its DNS;
	// 169.254.1.2 pasta's; 172.17.0.1 docker's default bridge; the
	// sandbox's default gateway is read inside.
	targets := append([]string{"127.0.0.1", "10.0.2.2", "10.0.2.3", "169.254.1.2", "172.17.0.1", "$GW"}, outside...)
	b := s.newBox(t, func(c *berth.SandboxConfig) { c.Network = true })
	var script strings.Builder
	script.WriteString("GW=$($BB ip route 2>/dev/null | $BB awk '/^default/ {print $3; exit}')\necho gateway=$GW\n")
	for _, addr := range targets {
		for _, port := range []int{api.port(), other.port()} {
			fmt.Fprintf(&script, "[ -n \"%[1]s\" ] && printf 'GET /v1/sessions HTTP/1.0\\r\\n\\r\\n' | $BB timeout 5 $BB nc -w 2 %[1]s %[2]d && echo REACHED-%[1]s-%[2]d\n", addr, port)
		}
	}
	fmt.Fprintf(&script, "$BB timeout 5 $BB nc -w 2 %s %d </dev/null\n", outside[0], control.port())
	script.WriteString("$BB cat /etc/resolv.conf\n")
	out := runEscape(t, b, script.String())
	for _, bad := range []string{"REACHED", "BERTH-API-ANSWERED", "LOOPBACK-SERVICE"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the sandbox reached a service on the host's loopback:\n%s", bad, out)
		}
	}
	if n := api.accepted.Load() + other.accepted.Load(); n > 0 {
		t.Errorf("the host's loopback services accepted %d connection(s) from the sandbox:\n%s", n, out)
	}
	// The control: the network works, so the refusals above are the
	// sandbox's doing, not a sandbox without network.
	if !strings.Contains(out, "OUTSIDE-CONTROL") || control.accepted.Load() == 0 {
		t.Errorf("the sandbox could not reach the host's service on %s, so the check proves nothing:\n%s", outside[0], out)
	}
	if !strings.Contains(out, "nameserver") {
		t.Errorf("the sandbox has no resolver configured:\n%s", out)
	}
}

// testDaemonHomeInWorkspace: a workspace that contains the daemon's home
// (as `berth run --workspace ~` with the default ~/.berth does) shows
// nothing of it, nor of a socket of the daemon's elsewhere in the
// workspace (SandboxConfig.Hide), while the session's own home inside
// that daemon home stays visible and writable.
func testDaemonHomeInWorkspace(t *testing.T, s *suite) {
	ws := t.TempDir()
	daemon := filepath.Join(ws, ".berth")
	home := filepath.Join(daemon, "sessions", "ses_x", "home")
	secret := "daemon-token-" + newMarker()
	for _, d := range []string{home, filepath.Join(daemon, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"berth.db": "SQLite format 3 " + secret, "token": secret, "run/shim.log": secret} {
		if err := os.WriteFile(filepath.Join(daemon, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The API socket in the home, and one the config put elsewhere.
	for _, p := range []string{filepath.Join(daemon, "berth.sock"), filepath.Join(ws, "api.sock")} {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
	}
	if err := os.WriteFile(filepath.Join(ws, "control.txt"), []byte("workspace-control"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := s.newBox(t, func(c *berth.SandboxConfig) {
		c.Workspace, c.Home = ws, home
		c.Hide = []string{daemon, filepath.Join(ws, "api.sock")}
	})
	out := runEscape(t, b, fmt.Sprintf(`D=%s
ls -laR $D
cat $D/berth.db $D/token $D/run/shim.log
[ -S $D/berth.sock ] && echo SOCKET_VISIBLE
[ -S api.sock ] && echo OTHER_SOCKET_VISIBLE
echo overwritten > $D/berth.db 2>/dev/null && echo DB_WRITTEN
echo home-control > "$HOME/control" && cat "$HOME/control"
cat control.txt`, quote(daemon)))
	if strings.Contains(out, secret) {
		t.Errorf("the sandbox read the daemon's files:\n%s", out)
	}
	for _, bad := range []string{"SOCKET_VISIBLE", "berth.sock", "berth.db", "shim.log"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the sandbox saw the daemon's home:\n%s", bad, out)
		}
	}
	// Nothing of the daemon's changed hands on the host either (a
	// provider that gives the workspace to the sandbox's user skips it).
	for _, name := range []string{"", "berth.db", "token", "run", "run/shim.log"} {
		if fi, err := os.Lstat(filepath.Join(daemon, name)); err == nil {
			if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
				t.Errorf("the daemon's %s now belongs to uid %d on the host", filepath.Join(daemon, name), uid)
			}
		}
	}
	if got, _ := os.ReadFile(filepath.Join(daemon, "berth.db")); !strings.Contains(string(got), secret) {
		t.Errorf("the sandbox overwrote the daemon's database: %q", got)
	}
	if !strings.Contains(out, "workspace-control") || !strings.Contains(out, "home-control") {
		t.Errorf("the workspace or the session's home is not usable, so the check proves nothing:\n%s", out)
	}
	if got, _ := os.ReadFile(filepath.Join(home, "control")); string(got) != "home-control\n" {
		t.Errorf("the session's home write did not land on the host: %q", got)
	}
}
