package demoagent

import (
	"context"

	acp "github.com/coder/acp-go-sdk"
)

// The demo agent's one auth method, offered with --require-auth.
const (
	authMethodID   = "demo-login"
	authMethodName = "Demo login"
)

// codeAuthRequired is ACP's JSON-RPC error code for "authentication required".
const codeAuthRequired = -32000

// authMethods is what initialize advertises: demo-login with
// --require-auth, nothing otherwise.
func (a *agent) authMethods() []acp.AuthMethod {
	if !a.requireAuth {
		return []acp.AuthMethod{}
	}
	desc := "log in to the demo agent (always succeeds)"
	return []acp.AuthMethod{{Agent: &acp.AuthMethodAgent{Id: authMethodID, Name: authMethodName, Description: &desc}}}
}

// authRequired is the error session/new and session/prompt answer while
// the agent requires auth and has not had it; nil otherwise.
func (a *agent) authRequired(reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.requireAuth || a.authed {
		return nil
	}
	return &acp.RequestError{Code: codeAuthRequired, Message: "Authentication required",
		Data: map[string]any{"reason": reason, "methods": []string{authMethodID}}}
}

// logout forgets the login: the next prompt answers auth_required.
func (t *turn) logout(string) error {
	t.a.mu.Lock()
	t.a.authed = false
	t.a.mu.Unlock()
	return t.say("logged out")
}

// Authenticate implements acp.Agent: demo-login always succeeds when the
// agent offers it; anything else is invalid params.
func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	if err := a.enter(); err != nil {
		return acp.AuthenticateResponse{}, err
	}
	defer a.leave()
	if !a.requireAuth || p.MethodId != authMethodID {
		return acp.AuthenticateResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown auth method " + p.MethodId})
	}
	a.mu.Lock()
	a.authed = true
	a.mu.Unlock()
	return acp.AuthenticateResponse{}, nil
}
