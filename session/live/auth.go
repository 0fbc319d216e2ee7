package live

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
func (ls *Session) acpSession() string {
	if p := ls.acpID.Load(); p != nil {
		return *p
	}
	return ""
}

// setACPSession records the agent's session id.
func (ls *Session) setACPSession(id string) { ls.acpID.Store(&id) }

// isAuthRequired reports whether the agent answered ACP auth_required.
func isAuthRequired(err error) bool {
	var rpcErr *acp.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired
}

// awaitAuth leaves a session whose agent answered session/new (or load)
// with auth_required in starting, badge needs_auth, with the agent's auth
// methods: Authenticate finishes the start (docs/api.md, Authentication). The
// caller tells of a lease lost (tellLeaseLost): it may hold authMu.
func (ls *Session) awaitAuth(ctx context.Context, cause error) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.exited || ls.stopReason != "" {
		ls.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-ls.finished
		ls.mu.Lock()
		return nil
	}
	ls.awaitingAuth = true
	if err := ls.saveLocked(ctx, berth.StateStarting, func(s *berth.Session) { s.NeedsAuth = true }); err != nil {
		ls.logger.Error("could not record needs_auth", "err", err)
	}
	var rpcErr *acp.Error
	errors.As(cause, &rpcErr)
	ls.Emit("", berth.EventRuntimeWarning, map[string]any{
		"reason": "the agent needs authentication before it starts a conversation: authenticate with one of acp.auth_methods",
		"error":  &berth.ACPError{Code: "auth_required", Message: rpcErr.Message, Data: rpcErr.Data}})
	ls.logger.Info("session waits for authentication", "agent", ls.spec.Name)
	return nil
}

// Authenticate is Authenticate on the live session.
func (ls *Session) Authenticate(ctx context.Context, methodID string) (*berth.Session, error) {
	// A resumed session's start that waits for this may have to give the
	// agent a new conversation with the transcript so far: read now, as
	// the manager reads it (a callback) and authMu is not held yet.
	transcript := ""
	if ls.resumeFrom != "" && ls.waitsForAuth() {
		transcript = ls.readTranscript(ctx)
	}
	defer ls.tellLeaseLost()
	ls.authMu.Lock()
	defer ls.authMu.Unlock()
	ls.mu.Lock()
	s := ls.sess
	gone := ls.exited || ls.stopReason != ""
	ls.mu.Unlock()
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
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ls.h.Limits.HandshakeTimeout)
	defer cancel()
	if err := ls.client.Authenticate(actx, methodID); err != nil {
		var rpcErr *acp.Error
		if errors.As(err, &rpcErr) && rpcErr.Message != acp.ErrClosed.Error() {
			return nil, &berth.Error{Code: berth.EInvalid, Message: "the agent refused authentication: " + rpcErr.Message,
				Details: map[string]any{"code": rpcErr.Code, "data": rpcErr.Data}}
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "the agent did not answer authenticate")
	}
	ls.logger.Info("agent authenticated", "method", methodID)
	// A start that waited for this finishes now (a session a restarted
	// daemon reattached was active already: it has no start to finish).
	if s.State == berth.StateStarting && s.NeedsAuth && ls.init != nil {
		if err := ls.finishStart(context.WithoutCancel(ctx), transcript); err != nil {
			return nil, err
		}
	}
	if err := ls.h.Log.FlushSession(ctx, ls.id); err != nil {
		ls.logger.Warn("flush after authenticate", "err", err)
	}
	return ls.View(), nil
}

// waitsForAuth reports whether the session's start waits for authenticate.
func (ls *Session) waitsForAuth() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.sess.State == berth.StateStarting && ls.sess.NeedsAuth
}

// finishStart opens the conversation of a session that waited for
// authentication: active, or waiting again when the agent still says
// auth_required, or stopped startup_failed on any other answer.
// transcript is what a new conversation of a resumed session carries.
func (ls *Session) finishStart(ctx context.Context, transcript string) error {
	hctx, cancel := context.WithTimeout(ctx, ls.h.Limits.HandshakeTimeout)
	defer cancel()
	ls.mu.Lock()
	before := controlsOf(ls.sess.ACP)
	ls.mu.Unlock()
	o, err := ls.openACPSession(hctx, ls.init, ls.handler)
	if isAuthRequired(err) {
		return ls.awaitAuth(ctx, err)
	}
	if err != nil {
		return ls.handshakeFailed(ctx, "session/new", err)
	}
	return ls.activate(ctx, o, transcript, before)
}
