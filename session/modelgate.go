package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
)

// ModelGateway is how the manager points its agents at the daemon's model
// gateway (docs/api.md, The model gateway).
type ModelGateway struct {
	// Gateway serves the agents' model calls.
	Gateway *gateway.Gateway
	// HostURL is the gateway's root on the daemon's loopback port
	// (http://127.0.0.1:PORT), where the agents of the host sandbox call
	// it; "" gives them none.
	HostURL string
}

// modelGate points the agents at the model gateway: each session's
// placeholder key, derived from the home's secret and the session's id so
// that an agent that outlives the daemon keeps a key the next daemon
// honours, registered while the agent runs; and the environment that
// points the agent at its upstream.
type modelGate struct {
	m *Manager
	// secretOnce makes secret: the shims' key when there are shims (it
	// survives a restart), else a random one of this manager's.
	secretOnce sync.Once
	secret     []byte
	// socks serve the gateway into the isolating sandboxes (modelsock.go).
	socks modelSockets
}

// modelSecretVars are the variables through which an agent would find a
// real model credential or another endpoint: an agent pointed at the
// gateway never inherits them from the daemon.
var modelSecretVars = map[string]bool{
	"ANTHROPIC_API_KEY": true, "ANTHROPIC_AUTH_TOKEN": true, "ANTHROPIC_BASE_URL": true, "CLAUDE_CODE_OAUTH_TOKEN": true,
	"OPENAI_API_KEY": true, "OPENAI_BASE_URL": true, "OPENAI_API_BASE": true, "CODEX_API_KEY": true,
	"GEMINI_API_KEY": true, "GOOGLE_API_KEY": true, "GOOGLE_GEMINI_BASE_URL": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
	"DASHSCOPE_API_KEY": true, "OPENROUTER_API_KEY": true,
}

// enabled reports whether the daemon serves a model gateway.
func (g *modelGate) enabled() bool { return g.m.opts.Models != nil && g.m.opts.Models.Gateway != nil }

// kindOf is the model API kind spec's agent calls, "" for none.
func kindOf(spec berth.AgentSpec) gateway.Kind {
	if spec.ModelAPI == "" || spec.ModelAPI == berth.ModelAPINone {
		return ""
	}
	return gateway.Kind(spec.ModelAPI)
}

// defaultUpstream is the upstream an agent calling kind is pointed at
// when the session picks none: the built-in of the kind's family.
func defaultUpstream(kind gateway.Kind) string {
	if kind == gateway.KindOpenAIResponses {
		return string(gateway.KindOpenAI)
	}
	return string(kind)
}

// sameFamily reports whether an upstream of kind up serves an agent that
// calls kind want (the OpenAI kinds serve each other's agents).
func sameFamily(up, want gateway.Kind) bool {
	openAI := func(k gateway.Kind) bool { return k == gateway.KindOpenAI || k == gateway.KindOpenAIResponses }
	return up == want || openAI(up) && openAI(want)
}

// checkModels checks a create's models: each key a kind, each value an
// upstream of that kind. An error names the field (models.KIND).
func (g *modelGate) checkModels(models map[string]string) error {
	for kind, name := range models {
		field := "models." + kind
		if !slices.Contains(gateway.Kinds, gateway.Kind(kind)) {
			return fieldError(field, fmt.Sprintf("%s: %q is none of anthropic, openai, openai-responses, gemini", field, kind))
		}
		if !g.enabled() {
			return fieldError(field, field+": this daemon serves no model gateway")
		}
		up, ok := g.m.opts.Models.Gateway.Upstream(name)
		if !ok {
			return fieldError(field, fmt.Sprintf("%s: no upstream %q (the configuration's [[models]] names them)", field, name))
		}
		if !sameFamily(up.Kind, gateway.Kind(kind)) {
			return fieldError(field, fmt.Sprintf("%s: upstream %q is of kind %s", field, name, up.Kind))
		}
	}
	return nil
}

// fieldError is an EInvalid error about one field of the request.
func fieldError(field, msg string) error {
	return &berth.Error{Code: berth.EInvalid, Message: msg, Details: map[string]any{"field": field}}
}

// key is session id's placeholder key.
func (g *modelGate) key(id string) string {
	g.secretOnce.Do(func() {
		g.secret = g.m.shimKey
		if len(g.secret) == 0 {
			g.secret = []byte(rand.Text())
		}
	})
	mac := hmac.New(sha512.New, g.secret)
	mac.Write([]byte("model-gateway\x00" + id))
	var b [gateway.KeyBytes]byte
	copy(b[:], mac.Sum(nil))
	return gateway.Key(b)
}

// baseURL is where session s's agent (spec) reaches the gateway, "" when
// it does not.
func (g *modelGate) baseURL(s *berth.Session, spec berth.AgentSpec) string {
	if g.m.place.capsOf(s.Sandbox.Provider).Binds {
		// An isolating sandbox never reaches the daemon's loopback: its own
		// has the relay.
		if g.relayed(s, spec) {
			return "http://" + relayAddr
		}
		return ""
	}
	return g.m.opts.Models.HostURL
}

// env is the environment that points session s's agent (spec) at its
// upstream on the gateway; nil when the agent calls no model API or the
// session's sandbox does not reach the gateway.
func (g *modelGate) env(s *berth.Session, spec berth.AgentSpec) map[string]string {
	kind := kindOf(spec)
	if kind == "" || !g.enabled() {
		return nil
	}
	base := g.baseURL(s, spec)
	if base == "" {
		return nil
	}
	name := s.Models[string(kind)]
	if name == "" {
		name = defaultUpstream(kind)
	}
	if _, ok := g.m.opts.Models.Gateway.Upstream(name); !ok {
		return nil
	}
	key := g.key(s.ID)
	env := gateway.AgentEnv(kind, base+"/"+name, key)
	// The catalog's model_env, for an agent that reads its endpoint from
	// its own configuration: the URL and the key are URL-safe, so they
	// stand as they are in the JSON or TOML those values hold.
	fill := strings.NewReplacer("{url}", gateway.AgentURL(kind, base+"/"+name), "{key}", key)
	for k, v := range spec.ModelEnv {
		env[k] = fill.Replace(v)
	}
	return env
}

// grant registers the key of session s's agent (spec), about to start in
// provider's sandbox or reattached there, when it is pointed at the
// gateway, and serves its socket when it calls through the relay. What
// fails is logged and returned as the session's warning: the agent runs
// without the gateway.
func (g *modelGate) grant(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) (warning string) {
	if g.env(s, spec) == nil {
		return ""
	}
	if err := g.m.opts.Models.Gateway.RegisterKey(s.ID, g.key(s.ID)); err != nil {
		g.m.logger.Warn("model gateway: register a session's key", "session_id", s.ID, "err", err)
	}
	if g.relayed(s, spec) && provider != nil {
		if err := g.serveSocket(s.ID, provider); err != nil {
			g.m.logger.Warn("model gateway: serve a session's socket", "session_id", s.ID, "err", err)
			return "the agent cannot reach the model gateway: " + berth.ErrorMessage(err)
		}
	}
	return ""
}

// revoke ends session id's key and its socket (with its directory when
// removeDir): its agent stopped.
func (g *modelGate) revoke(id string, removeDir bool) {
	if g.enabled() {
		g.m.opts.Models.Gateway.Unregister(id)
		g.revokeSocket(id, removeDir)
	}
}

// GatewaySessions is what the model gateway asks and tells the manager
// about the calls of its sessions' agents (gateway.Options.Sessions).
func (m *Manager) GatewaySessions() gateway.Sessions { return modelSessions{m} }

// modelSessions is the manager as the gateway's gateway.Sessions.
type modelSessions struct{ m *Manager }

// Admit is asked before a call of session sessionID's agent to upstream
// is forwarded: an error (code rate_limited, which the gateway answers
// 429) when the spending of the session or of an ancestor's tree reached
// its budget. It reads the store only when what it holds of a session is
// older than a few seconds (usage.go).
func (ms modelSessions) Admit(ctx context.Context, sessionID, upstream string) error {
	return ms.m.usage.admit(ctx, sessionID)
}

// Called is told of a call of session sessionID's agent that was
// forwarded: once one went through, the session's missing credential is
// cleared; then the call is counted (usage.go): model_call logged, the
// session's usage and its ancestors' tree usage added to, the metrics
// told, and budget_exceeded on every session whose budget it reached.
// The session may be live, detached or stopped: the call is counted as
// long as the session exists.
func (ms modelSessions) Called(sessionID string, c gateway.Call) {
	if c.Status < 400 {
		if ls := ms.m.set.liveOf(sessionID); ls != nil {
			ls.SetMissingCredential(context.Background(), "")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), usageWriteTimeout)
	defer cancel()
	ms.m.usage.called(ctx, sessionID, c)
}

// Missing shows that the session's agent lacks credential: auth.missing
// and the badge needs_auth.
func (ms modelSessions) Missing(sessionID, credential string) {
	if ls := ms.m.set.liveOf(sessionID); ls != nil {
		ls.SetMissingCredential(context.Background(), credential)
	}
}

// cloneModels copies a create's models.
func cloneModels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// credentialsOf fills in, for each agent that calls a model API, the
// credential its default upstream needs and whether the store holds it,
// so that a client can say which key is missing before a session fails
// (docs/api.md, GET /v1/agents). A store that cannot list credentials
// leaves them all unset: the list of agents still answers.
func (g *modelGate) credentialsOf(ctx context.Context, agents []berth.AgentInfo) {
	if !g.enabled() {
		return
	}
	var set map[string]bool
	for i := range agents {
		a := &agents[i]
		if a.ModelAPI == "" {
			continue
		}
		up, ok := g.m.opts.Models.Gateway.Upstream(defaultUpstream(gateway.Kind(a.ModelAPI)))
		if !ok || up.Credential == "" {
			continue
		}
		if set == nil {
			set = map[string]bool{}
			creds, err := g.m.store.ListCredentials(ctx)
			if err != nil {
				g.m.logger.Warn("list credentials for the agents", "err", err)
			}
			for _, c := range creds {
				set[c.Name] = true
			}
		}
		a.Credential = up.Credential
		a.CredentialSet = set[up.Credential]
	}
}
