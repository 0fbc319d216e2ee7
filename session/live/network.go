package live

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// The network policy's side of a live session (docs/api.md, Network
// policy): what the egress proxy tells of and asks about its connections.

// NetworkDenied logs network_denied: the egress proxy refused a
// connection to host:port.
func (ls *Session) NetworkDenied(host string, port int) {
	ls.Emit("", berth.EventNetworkDenied, map[string]any{"host": host, "port": port})
}

// The options of a network question, by id.
var connectOptions = []acp.PermissionOption{
	{OptionID: "allow_once", Name: "Allow once", Kind: berth.DecisionAllowOnce},
	{OptionID: "allow_always", Name: "Allow for this session", Kind: berth.DecisionAllowAlways},
	{OptionID: "reject_once", Name: "Reject", Kind: berth.DecisionRejectOnce},
}

// AskConnect asks whether the agent may connect to host:port, which the
// session's allow list does not let through: a permission request whose
// tool call is a synthetic fetch, decided like any other but never
// remembered for the fetch kind (an answer is about this host alone). It
// returns the kind of the option chosen (berth.DecisionAllowOnce,
// berth.DecisionAllowAlways), or "" for a rejection, a timeout or a
// cancel.
func (ls *Session) AskConnect(ctx context.Context, host string, port int) (string, error) {
	// The client is set once the session is ready; an agent connects only
	// after that.
	select {
	case <-ls.life.ready:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if ls.client == nil {
		return "", nil
	}
	// The question ends with the agent's connection, as the agent's own
	// do: a stop does not wait for it (its timer holds the drain). The
	// watcher ends when AskConnect returns, at the latest.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ls.client.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	tc, err := json.Marshal(map[string]any{"toolCallId": ids.New(netQuestionPrefix), "kind": "fetch", "title": "connect to " + hp,
		"status": "pending", "rawInput": map[string]any{"host": host, "port": port}})
	if err != nil {
		return "", err
	}
	resp, err := ls.asks.request(ctx, acp.RequestPermissionRequest{SessionID: ls.id, ToolCall: tc, Options: connectOptions}, "")
	if err != nil || resp.Outcome.Outcome != "selected" {
		return "", err
	}
	for _, o := range connectOptions {
		if o.OptionID == resp.Outcome.OptionID {
			return o.Kind, nil
		}
	}
	return "", nil
}

// AllowHost keeps entry, a host allowed for the session, in the session's
// allow list, so that a restart or a resume lets it through too.
func (ls *Session) AllowHost(ctx context.Context, entry string) error {
	ls.mu.Lock()
	defer ls.unlock()
	p := ls.sess.Sandbox.NetworkPolicy
	if p == nil || slices.Contains(p.Allow, entry) {
		return nil
	}
	return ls.saveLocked(ctx, ls.sess.State, func(s *berth.Session) {
		np := *p
		np.Allow = append(slices.Clone(p.Allow), entry)
		s.Sandbox.NetworkPolicy = &np
	})
}

// netQuestionPrefix begins the tool call id of a network question.
const netQuestionPrefix = "net"

// networkQuestion reports whether a stored permission's tool call is a
// network question's (AskConnect). An agent that gives its own tool call
// such an id only has its question cancelled at a restart, and asked
// again when it asks again.
func networkQuestion(toolCall json.RawMessage) bool {
	var tc struct {
		ID string `json:"toolCallId"`
	}
	return json.Unmarshal(toolCall, &tc) == nil && strings.HasPrefix(tc.ID, netQuestionPrefix+"_")
}

// dropNetworkQuestions cancels the network questions a previous daemon
// left pending (docs/api.md, Network policy): each held a connection to
// that daemon's egress proxy, which ended with it, so no answer could
// let anything through. The agent's next connection to the host asks
// again; nothing is allowed without a question.
func (a *asks) dropNetworkQuestions(ctx context.Context) {
	ls := a.ls
	// Held from the resolved events to the records, as decide does.
	ls.recordMu.RLock()
	defer ls.recordMu.RUnlock()
	var dropped []berth.Permission
	ls.mu.Lock()
	kept := a.adoptable[:0]
	for _, p := range a.adoptable {
		if !networkQuestion(p.ToolCall) {
			kept = append(kept, p)
			continue
		}
		dropped = append(dropped, p)
		ls.Emit(a.turnTagLocked(p.TurnID), berth.EventPermissionResolved, ResolvedData{PermissionID: p.ID, DecidedBy: berth.DecidedByCancel})
	}
	a.adoptable = kept
	ls.mu.Unlock()
	now := time.Now().UTC()
	for i := range dropped {
		p := &dropped[i]
		p.State, p.DecidedBy, p.DecidedAt = berth.PermissionCanceled, berth.DecidedByCancel, &now
		if err := ls.h.Store.DecidePermission(ctx, p); err != nil && !berth.IsCode(err, berth.EConflict) {
			ls.logger.Warn("cancel a network question of the previous daemon", "err", err)
		}
	}
}
