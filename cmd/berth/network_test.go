package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/relay"
	"github.com/berth-sh/berth/internal/testenv"
)

// On bwrap and docker a session with an allow list naming one of two
// listeners on the host's loopback reaches that one through its
// HTTP_PROXY and nothing else: the other is refused and logged as
// network_denied, a direct connection to either goes nowhere. On host an
// allow list is refused, naming network.
func TestNetworkAllowListOnEveryProvider(t *testing.T) {
	// Never on a port the sandbox's relay holds on its own loopback: a
	// direct connection there would reach the relay.
	listener := func(name string) string {
		_, addr := testenv.Answering(t, name, relay.DefaultListen, relay.DefaultEgressListen)
		return addr
	}
	listed, other := listener("listed"), listener("unlisted")
	// Its sessions' egress sockets live below the home.
	s := startServerEnv(t, shortHome(t), providerEnv())
	network := map[string]any{"allow": []string{listed}}
	var e struct {
		Error berth.Error `json:"error"`
	}
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": berth.SandboxHost, "network": network}, &e); st != 400 || e.Error.Details["field"] != "network" {
		t.Fatalf("an allow list on host = %d %+v", st, e.Error)
	}
	for _, provider := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			sess := s.create(t, map[string]any{"agent": "demo", "sandbox": provider, "network": network})
			if p := sess.Sandbox.NetworkPolicy; sess.Sandbox.Network || p == nil || !slices.Equal(p.Allow, []string{listed}) {
				t.Fatalf("sandbox %+v", sess.Sandbox)
			}
			if r := s.turn(t, sess.ID, "fetch http://"+listed+"/"); r.Text != "fetch: 200 listed" {
				t.Fatalf("the listed host: %+v\n%s", r, s.log)
			}
			if r := s.turn(t, sess.ID, "fetch http://"+other+"/"); !strings.HasPrefix(r.Text, "fetch: 403 ") {
				t.Fatalf("the unlisted host: %+v", r)
			}
			for _, hp := range []string{listed, other} {
				if r := s.turn(t, sess.ID, "fetch-direct http://"+hp+"/"); r.Text != "fetch: error" {
					t.Fatalf("a direct connection to %s: %+v", hp, r)
				}
			}
			var denied []string
			for _, ev := range s.allEvents(t, sess.ID) {
				if ev.Type == berth.EventNetworkDenied {
					var d struct {
						Host string `json:"host"`
						Port int    `json:"port"`
					}
					_ = json.Unmarshal(ev.Data, &d)
					denied = append(denied, fmt.Sprintf("%s:%d", d.Host, d.Port))
				}
			}
			if !slices.Equal(denied, []string{other}) {
				t.Fatalf("network_denied events %q, want the unlisted host once", denied)
			}
			// A command run through exec goes out the same way: it is
			// given the proxy's address, and only the listed host is let
			// through. (The request is made by hand, with the sandbox's
			// busybox, whose wget cannot use a proxy; nc runs the shell
			// that writes the request and copies the answer to stderr.)
			get := func(hp string) berth.ExecResult {
				var r berth.ExecResult
				script := `p=${http_proxy#http://}; exec busybox nc -w 10 "${p%:*}" "${p##*:}" -e busybox sh -c ` +
					`'printf "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" "$0" "$0"; busybox cat >&2' "$1"`
				if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"command": []string{"busybox", "sh", "-c", script, "sh", hp}}, &r); st != 200 {
					t.Fatalf("exec = %d %v", st, err)
				}
				return r
			}
			if r := get(listed); !strings.HasPrefix(r.Stderr, "HTTP/1.1 200 ") || !strings.HasSuffix(r.Stderr, "\r\n\r\nlisted") {
				t.Fatalf("exec: the listed host: %+v", r)
			}
			if r := get(other); !strings.HasPrefix(r.Stderr, "HTTP/1.1 403 ") {
				t.Fatalf("exec: the unlisted host: %+v", r)
			}
			if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/stop", nil, nil); st != 200 {
				t.Fatalf("stop = %d", st)
			}
		})
	}
	// The CLI makes an allow list, and shows it.
	s.needSandbox(t, berth.SandboxBwrap)
	if out, code := s.run(t, "create", "-q", "--agent", "demo", "--sandbox", "host", "--network-ask"); code != 2 || !strings.Contains(out, "--network-ask goes with an allow list") {
		t.Fatalf("--network-ask alone: %d %s", code, out)
	}
	if out, code := s.run(t, "create", "-q", "--agent", "demo", "--network=bad host"); code == 0 || !strings.Contains(out, "network.allow[0]") {
		t.Fatalf("--network with a bad entry: %d %s", code, out)
	}
	id := strings.TrimSpace(s.cli(t, "create", "-q", "--agent", "demo", "--sandbox", "bwrap", "--network="+listed+",API.example.com", "--network-ask"))
	if out := s.cli(t, "show", id); !strings.Contains(out, "bwrap, network only to "+listed+" api.example.com (asks for others)") {
		t.Fatalf("berth show:\n%s", out)
	}
	s.cli(t, "stop", id)
}

// A network question pending when the daemon is SIGKILLed dies with the
// connection it held: the next daemon shows it cancelled at once, never
// pending, and the agent's next connection to that host is asked about
// again (rejected, it is refused), never let through unasked.
func TestNetworkQuestionAfterSIGKILL(t *testing.T) {
	home := shortHome(t)
	s := startServerEnv(t, home, providerEnv())
	s.needSandbox(t, berth.SandboxBwrap)
	const target = "http://203.0.113.7/"
	sess := s.busySessionWith(t, map[string]any{"sandbox": berth.SandboxBwrap, "permission_mode": berth.PermAsk,
		"network": map[string]any{"allow": []string{}, "ask": true}}, "fetch "+target+"\nask go on\nfetch "+target)
	path := "/v1/sessions/" + sess.ID + "/permissions"
	list := func(s *server, query string) []berth.Permission {
		var out struct {
			Permissions []berth.Permission `json:"permissions"`
		}
		if st, err := s.api("GET", path+query, nil, &out); st != 200 {
			t.Fatalf("permissions = %d %v", st, err)
		}
		return out.Permissions
	}
	// waitPending waits for a pending permission other than those seen.
	waitPending := func(s *server, seen ...string) berth.Permission {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, p := range list(s, "?state=pending") {
				if !slices.Contains(seen, p.ID) {
					return p
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no new pending permission (seen %v)\n%s", seen, s.log)
		return berth.Permission{}
	}
	question := waitPending(s)
	if !strings.Contains(string(question.ToolCall), "connect to 203.0.113.7:80") {
		t.Fatalf("the first question: %s", question.ToolCall)
	}
	s.kill9()

	s2 := startServerEnv(t, home, providerEnv())
	// The agent's own question, served again to the new daemon: by then
	// the network question is settled.
	goOn := waitPending(s2, question.ID)
	if strings.Contains(string(goOn.ToolCall), "connect to") {
		t.Fatalf("the agent's question after the restart: %s", goOn.ToolCall)
	}
	for _, p := range list(s2, "") {
		if p.ID == question.ID && (p.State != berth.PermissionCanceled || p.DecidedBy != berth.DecidedByCancel) {
			t.Fatalf("the network question after the restart: %s by %q, want canceled", p.State, p.DecidedBy)
		}
	}
	if st, err := s2.api("POST", path+"/"+question.ID, map[string]string{"option_id": "allow_always"}, nil); st != 409 {
		t.Fatalf("allowing the dead question = %d %v, want 409", st, err)
	}
	if st, err := s2.api("POST", path+"/"+goOn.ID, map[string]string{"decision": "allow_once"}, nil); st != 200 {
		t.Fatalf("allow the agent's question = %d %v", st, err)
	}
	again := waitPending(s2, question.ID, goOn.ID)
	if !strings.Contains(string(again.ToolCall), "connect to 203.0.113.7:80") {
		t.Fatalf("the second connection's question: %s", again.ToolCall)
	}
	if st, err := s2.api("POST", path+"/"+again.ID, map[string]string{"option_id": "reject_once"}, nil); st != 200 {
		t.Fatalf("reject = %d %v", st, err)
	}
	reason, _, text := s2.endedTurn(t, sess, berth.EventPermissionRequested)
	if reason != berth.TurnEndTurn || !strings.Contains(text, "fetch: error") || !strings.Contains(text, "fetch: 403") {
		t.Fatalf("turn ended %q with %q", reason, text)
	}
	if p := s2.session(t, sess.ID).Sandbox.NetworkPolicy; p == nil || len(p.Allow) != 0 {
		t.Fatalf("the session's policy after it all: %+v", p)
	}
}
