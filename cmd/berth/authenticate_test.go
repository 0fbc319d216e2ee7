package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// authenticateAgainst runs berth authenticate against a daemon that
// answers session (a Session's JSON).
func authenticateAgainst(t *testing.T, session string, args ...string) (string, error) {
	t.Helper()
	isolateEnv(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, session)
	}))
	t.Cleanup(ts.Close)
	return runCLI(t, append([]string{"authenticate", "ses_a", "login", "--addr", ts.URL}, args...)...)
}

// berth authenticate never says "authenticated" while the badge says
// needs_auth: it fails saying what is still missing.
func TestAuthenticateSaysWhatIsStillMissing(t *testing.T) {
	cases := []struct {
		name, session string
		want          []string
	}{
		{"a gateway credential", `{"id":"ses_a","state":"active","badge":"needs_auth","auth":{"missing":"anthropic"}}`,
			[]string{"no credential anthropic", "berth credentials set anthropic"}},
		{"the agent's login", `{"id":"ses_a","state":"starting","badge":"needs_auth"}`,
			[]string{"still answers auth_required", "berth show ses_a"}},
		{"a turn that ends well", `{"id":"ses_a","state":"active","badge":"needs_auth"}`,
			[]string{"still shows needs_auth", "when a turn ends well"}},
	}
	for _, c := range cases {
		for _, json := range []bool{false, true} {
			var args []string
			if json {
				args = []string{"-o", "json"}
			}
			out, err := authenticateAgainst(t, c.session, args...)
			msg := errorText(err)
			if !berth.IsCode(err, berth.EUnauthenticated) || exitCode(err) != exitFailure || strings.Contains(out, "authenticated") {
				t.Fatalf("%s (json %v): printed %q, error %v", c.name, json, out, err)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error %q, want %q", c.name, msg, w)
				}
			}
			// -o json still prints the daemon's answer.
			if json != strings.Contains(out, `"badge":"needs_auth"`) {
				t.Errorf("%s (json %v): printed %q", c.name, json, out)
			}
		}
	}
	out, err := authenticateAgainst(t, `{"id":"ses_a","state":"active","badge":"idle"}`)
	if err != nil || out != "authenticated ses_a (active, idle)\n" {
		t.Fatalf("a session that no longer needs auth: %q, %v", out, err)
	}
}
