package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// On bwrap and docker a session with an allow list naming one of two
// listeners on the host's loopback reaches that one through its
// HTTP_PROXY and nothing else: the other is refused and logged as
// network_denied, a direct connection to either goes nowhere. On host an
// allow list is refused, naming network.
func TestNetworkAllowListOnEveryProvider(t *testing.T) {
	listener := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	listed, other := listener("listed"), listener("unlisted")
	s := startServerEnv(t, t.TempDir(), providerEnv())
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
