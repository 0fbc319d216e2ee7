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

// Authenticate is Authenticate on the live session.
func (ls *Session) Authenticate(ctx context.Context, methodID string) (*berth.Session, error) {
	return ls.conv.authenticate(ctx, methodID)
}

// authenticate is Authenticate.
func (c *conversation) authenticate(ctx context.Context, methodID string) (*berth.Session, error) {
	ls := c.ls
	// A resumed session's start that waits for this may have to give the
	// agent a new conversation with the transcript so far: read now, as
	// the manager reads it (a callback) and authMu is not held yet.
	transcript := ""
	if c.resumeFrom != "" && c.waitsForAuth() {
		transcript = c.readTranscript(ctx)
	}
	defer ls.tellLeaseLost()
	c.authMu.Lock()
	defer c.authMu.Unlock()
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
	if s.State == berth.StateStarting && s.NeedsAuth && c.init != nil {
		if err := c.finishStart(context.WithoutCancel(ctx), transcript); err != nil {
			return nil, err
		}
	}
	if err := ls.h.Log.FlushSession(ctx, ls.id); err != nil {
		ls.logger.Warn("flush after authenticate", "err", err)
	}
	return ls.View(), nil
}

// waitsForAuth reports whether the session's start waits for authenticate.
func (c *conversation) waitsForAuth() bool {
	ls := c.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.sess.State == berth.StateStarting && ls.sess.NeedsAuth
}

// awaitAuth leaves a session whose agent answered session/new (or load)
// with auth_required in starting, badge needs_auth, with the agent's auth
// methods: Authenticate finishes the start (docs/api.md, Authentication). The
// caller tells of a lease lost (tellLeaseLost): it may hold authMu.
func (c *conversation) awaitAuth(ctx context.Context, cause error) error {
	ls := c.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.exited || ls.stopReason != "" {
		ls.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-ls.life.finished
		ls.mu.Lock()
		return nil
	}
	c.awaitingAuth = true
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

// finishStart opens the conversation of a session that waited for
// authentication: active, or waiting again when the agent still says
// auth_required, or stopped startup_failed on any other answer.
// transcript is what a new conversation of a resumed session carries.
func (c *conversation) finishStart(ctx context.Context, transcript string) error {
	ls := c.ls
	hctx, cancel := context.WithTimeout(ctx, ls.h.Limits.HandshakeTimeout)
	defer cancel()
	ls.mu.Lock()
	before := controlsOf(ls.sess.ACP)
	ls.mu.Unlock()
	o, err := c.open(hctx, c.init, c.handler)
	if isAuthRequired(err) {
		return c.awaitAuth(ctx, err)
	}
	if err != nil {
		return c.handshakeFailed(ctx, "session/new", err)
	}
	return c.activate(ctx, o, transcript, before)
}

// isAuthRequired reports whether the agent answered ACP auth_required.
func isAuthRequired(err error) bool {
	var rpcErr *acp.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired
}
