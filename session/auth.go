package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// acpSession returns the agent's session id ("" before it has one).
func (rt *runtime) acpSession() string {
	if p := rt.acpID.Load(); p != nil {
		return *p
	}
	return ""
}

// setACPSession records the agent's session id.
func (rt *runtime) setACPSession(id string) { rt.acpID.Store(&id) }

// isAuthRequired reports whether the agent answered ACP auth_required.
func isAuthRequired(err error) bool {
	var rpcErr *acp.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired
}

// awaitAuth leaves a session whose agent answered session/new (or load)
// with auth_required in starting, badge needs_auth, with the agent's auth
// methods: Authenticate finishes the start (CONTRACT §3, issue 16.3).
func (rt *runtime) awaitAuth(ctx context.Context, cause error) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.exited || rt.stopReason != "" {
		rt.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-rt.finished
		rt.mu.Lock()
		return nil
	}
	rt.awaitingAuth = true
	if err := rt.saveLocked(ctx, berth.StateStarting, func(s *berth.Session) { s.NeedsAuth = true }); err != nil {
		rt.logger.Error("could not record needs_auth", "err", err)
	}
	var rpcErr *acp.Error
	errors.As(cause, &rpcErr)
	rt.emit("", berth.EventRuntimeWarning, map[string]any{
		"reason": "the agent needs authentication before it starts a conversation: authenticate with one of acp.auth_methods",
		"error":  &berth.ACPError{Code: "auth_required", Message: rpcErr.Message, Data: rpcErr.Data}})
	rt.logger.Info("session waits for authentication", "agent", rt.spec.Name)
	return nil
}

// Authenticate implements berth.SessionService: ACP authenticate with one
// of the agent's auth methods. A session waiting in starting for it then
// opens its conversation and becomes active (or, asked again, keeps
// waiting). EInvalid for a method the agent does not offer (naming those
// it does) or one the agent refuses; EConflict when the session is not
// live or still handshaking; ENotFound.
func (m *Manager) Authenticate(ctx context.Context, id, methodID string) (*berth.Session, error) {
	rt, err := m.handshakenRuntime(ctx, id, "resume it, then authenticate")
	if err != nil {
		return nil, err
	}
	return rt.authenticate(ctx, methodID)
}

// authenticate is Authenticate on the live session.
func (rt *runtime) authenticate(ctx context.Context, methodID string) (*berth.Session, error) {
	rt.authMu.Lock()
	defer rt.authMu.Unlock()
	rt.mu.Lock()
	s := rt.sess
	gone := rt.exited || rt.stopReason != ""
	rt.mu.Unlock()
	if gone {
		return nil, berth.Errorf(berth.EConflict, "session is stopping")
	}
	methods := acp.AuthMethodsOf(s.ACP.AuthMethods)
	if !slices.ContainsFunc(methods, func(a acp.AuthMethod) bool { return a.ID == methodID }) {
		offered := make([]string, len(methods))
		for i, a := range methods {
			offered[i] = a.ID
		}
		msg := "the agent offers no auth method"
		if len(offered) > 0 {
			msg = "unknown auth method " + fmt.Sprintf("%q", methodID) + "; the agent offers: " + strings.Join(offered, ", ")
		}
		return nil, &berth.Error{Code: berth.EInvalid, Message: msg, Details: map[string]any{"auth_methods": offered}}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.h.limits.HandshakeTimeout)
	defer cancel()
	if err := rt.client.Authenticate(actx, methodID); err != nil {
		var rpcErr *acp.Error
		if errors.As(err, &rpcErr) && rpcErr.Message != acp.ErrClosed.Error() {
			return nil, &berth.Error{Code: berth.EInvalid, Message: "the agent refused authentication: " + rpcErr.Message,
				Details: map[string]any{"code": rpcErr.Code, "data": rpcErr.Data}}
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "the agent did not answer authenticate")
	}
	rt.logger.Info("agent authenticated", "method", methodID)
	// A start that waited for this finishes now (a session a restarted
	// daemon reattached was active already: it has no start to finish).
	if s.State == berth.StateStarting && s.NeedsAuth && rt.init != nil {
		if err := rt.finishStart(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
	}
	if err := rt.h.log.FlushSession(ctx, rt.id); err != nil {
		rt.logger.Warn("flush after authenticate", "err", err)
	}
	return rt.view(), nil
}

// finishStart opens the conversation of a session that waited for
// authentication: active, or waiting again when the agent still says
// auth_required, or stopped startup_failed on any other answer.
func (rt *runtime) finishStart(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, rt.h.limits.HandshakeTimeout)
	defer cancel()
	rt.mu.Lock()
	before := controlsOf(rt.sess.ACP)
	rt.mu.Unlock()
	acpID, resumedBy, setup, err := rt.openACPSession(hctx, rt.init, rt.handler)
	if isAuthRequired(err) {
		return rt.awaitAuth(ctx, err)
	}
	if err != nil {
		return rt.handshakeFailed(ctx, "session/new", err)
	}
	return rt.activate(ctx, acpID, resumedBy, setup, before)
}

// handshakenRuntime returns the live runtime of session id once its
// handshake is over. A session with none (stopped) is EConflict, its
// message saying what to do (ifStopped); ENotFound.
func (m *Manager) handshakenRuntime(ctx context.Context, id, ifStopped string) (*runtime, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	rt := m.runtimeOf(id)
	if rt == nil {
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		return nil, berth.Errorf(berth.EConflict, "session is %s: %s", s.State, ifStopped)
	}
	if err := rt.awaitHandshake(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}
