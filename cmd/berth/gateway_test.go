package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/modelstub"
	"github.com/berth-sh/berth/internal/testenv"
)

// keyLog records the key headers each call to the stub carried.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys = append(k.keys, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		k.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (k *keyLog) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

// On every provider an agent with a model_api calls the model gateway
// with what berth gave it — on the daemon's loopback for host, on the
// sandbox's own loopback through berth agent-exec for bwrap (no network)
// and docker — and reaches the upstream (the model stub on the host's
// loopback) with no key of its own; an upstream whose credential is not
// set answers 401 naming it, and the session shows needs_auth with
// auth.missing.
func TestModelGatewayOnEveryProvider(t *testing.T) {
	s, seen := modelServer(t, providerEnv())
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			before := len(seen.all())
			sess := s.create(t, map[string]any{"agent": "demo-model", "sandbox": provider, "models": map[string]string{"anthropic": "free"}})
			if r := s.turn(t, sess.ID, "llm hello"); r.Text != "llm: 200 stub: hello" {
				t.Fatalf("the agent's model call: %+v\n%s", r, s.log)
			}
			if keys := seen.all()[before:]; len(keys) != 1 || keys[0] != "|" {
				t.Fatalf("the upstream saw keys %q, want none (the placeholder is removed)", keys)
			}
			// The call is counted from the upstream's own usage fields,
			// once its answer has ended (the count trails the turn).
			counted := func(id string, calls int64) {
				t.Helper()
				testenv.WaitFor(t, 20*time.Second, "the model call counted", func() bool { return s.session(t, id).Usage.ModelCalls == calls })
			}
			counted(sess.ID, 1)
			if u := s.session(t, sess.ID).Usage; u.InputTokens != modelstub.InputTokens || u.OutputTokens != modelstub.OutputTokens {
				t.Fatalf("usage after one call: %+v", u)
			}
			// A budget the first call spends refuses the next one in the
			// upstream's format; raising it lets the next through.
			capped := s.create(t, map[string]any{"agent": "demo-model", "sandbox": provider, "models": map[string]string{"anthropic": "free"}, "max_tokens": 1})
			if r := s.turn(t, capped.ID, "llm one"); r.Text != "llm: 200 stub: one" {
				t.Fatalf("the call within the budget: %+v", r)
			}
			counted(capped.ID, 1)
			if r := s.turn(t, capped.ID, "llm two"); !strings.HasPrefix(r.Text, "llm: 429 ") || !strings.Contains(r.Text, "budget of 1 tokens is spent") {
				t.Fatalf("the call past the budget: %+v", r)
			}
			if got := s.session(t, capped.ID); got.Badge != berth.BadgeOverBudget {
				t.Fatalf("past the budget: badge %s", got.Badge)
			}
			if out := s.cli(t, "show", capped.ID); !strings.Contains(out, "in 1 model calls; over budget") {
				t.Fatalf("berth show past the budget:\n%s", out)
			}
			if st, err := s.api("PATCH", "/v1/sessions/"+capped.ID, map[string]any{"max_tokens": 1000000}, nil); st != 200 || err != nil {
				t.Fatalf("raise the budget: %d %v", st, err)
			}
			if r := s.turn(t, capped.ID, "llm three"); r.Text != "llm: 200 stub: three" {
				t.Fatalf("the call after the budget was raised: %+v", r)
			}
			paid := s.create(t, map[string]any{"agent": "demo-model", "sandbox": provider, "models": map[string]string{"anthropic": "paid"}})
			r := s.turn(t, paid.ID, "llm hello")
			if !strings.HasPrefix(r.Text, "llm: 401 ") || !strings.Contains(r.Text, "berth credentials set paid-key") {
				t.Fatalf("a call whose credential is not set: %+v", r)
			}
			got := s.session(t, paid.ID)
			if got.Badge != berth.BadgeNeedsAuth || got.Auth == nil || got.Auth.Missing != "paid-key" {
				t.Fatalf("badge %s, auth %+v", got.Badge, got.Auth)
			}
			if out := s.cli(t, "show", paid.ID); !strings.Contains(out, `the credential "paid-key", which is not set: berth credentials set paid-key`) {
				t.Fatalf("berth show of a session that needs a credential:\n%s", out)
			}
			// Set with the CLI, the credential serves the same session's
			// next call: no restart, no re-create; the upstream sees it,
			// the agent never does.
			secret := "sk-paid-" + provider + "-0123456789abcdef"
			if out, code := s.cliWith(t, secret+"\n", nil, "credentials", "set", "paid-key"); code != 0 {
				t.Fatalf("credentials set: %d %s", code, out)
			}
			before = len(seen.all())
			if r := s.turn(t, paid.ID, "llm again"); r.Text != "llm: 200 stub: again" {
				t.Fatalf("the call after the credential was set: %+v", r)
			}
			if keys := seen.all()[before:]; len(keys) != 1 || keys[0] != secret+"|" {
				t.Fatalf("the upstream saw keys %q, want the credential as x-api-key", keys)
			}
			testenv.WaitFor(t, 20*time.Second, "needs_auth cleared by a call that went through", func() bool {
				got := s.session(t, paid.ID)
				return got.Badge != berth.BadgeNeedsAuth && got.Auth == nil
			})
			if out, code := s.cliWith(t, "", nil, "credentials", "rm", "paid-key"); code != 0 {
				t.Fatalf("credentials rm: %d %s", code, out)
			}
			for _, id := range []string{sess.ID, paid.ID, capped.ID} {
				if st, _ := s.api("POST", "/v1/sessions/"+id+"/stop", nil, nil); st != 200 {
					t.Fatalf("stop = %d", st)
				}
			}
		})
	}
}
