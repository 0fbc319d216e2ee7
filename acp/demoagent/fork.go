package demoagent

import (
	"context"
	"encoding/json"
	"errors"

	acp "github.com/coder/acp-go-sdk"
)

// forkTurnsMeta is the _meta key, in session/fork's request and in the
// fork capability, of the number of prompts the forked conversation keeps
// (berth forks at a checkpoint, before a given turn). The demo agent says
// in its capability that it honours it.
const forkTurnsMeta = "berth.sh/turns"

// forkCapability is the agent's sessionCapabilities.fork, nil when it does
// not offer session/fork.
func (a *agent) forkCapability() *acp.SessionForkCapabilities {
	if a.noFork {
		return nil
	}
	return &acp.SessionForkCapabilities{Meta: map[string]any{forkTurnsMeta: true}}
}

// UnstableForkSession implements session/fork: a new session in p.Cwd
// whose history is the source's, cut before its (n+1)th prompt when
// _meta says n.
func (a *agent) UnstableForkSession(ctx context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	if a.noFork {
		return acp.UnstableForkSessionResponse{}, acp.NewMethodNotFound("session/fork")
	}
	if err := a.enter(); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	defer a.leave()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	keep := -1
	if n, ok := p.Meta[forkTurnsMeta].(float64); ok && n >= 0 {
		keep = int(n)
	}
	src := string(p.SessionId)
	var hist *historyLog
	if s, err := a.lookup(p.SessionId); err == nil {
		hist = s.log
	} else {
		h, err := openHistory(a.stateDir, src)
		if errors.Is(err, errNoHistory) {
			return acp.UnstableForkSessionResponse{}, sessionNotFound(src)
		}
		if err != nil {
			return acp.UnstableForkSessionResponse{}, err
		}
		defer h.close()
		hist = h
	}
	var kept []record
	prompts := 0
	stop := errors.New("cut")
	err := hist.replay(func(r record) error {
		switch r.Type {
		case recSession:
			return nil
		case recUser:
			if keep >= 0 && prompts == keep {
				return stop
			}
			prompts++
		}
		kept = append(kept, r)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return acp.UnstableForkSessionResponse{}, err
	}
	id, log, err := a.newHistory(p.Cwd)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	for _, r := range kept {
		if err := log.append(r); err != nil {
			_ = log.close()
			return acp.UnstableForkSessionResponse{}, err
		}
	}
	// The unstable request's server type has the stable one's wire form.
	var mcp []acp.McpServer
	if b, err := json.Marshal(p.McpServers); err == nil {
		_ = json.Unmarshal(b, &mcp)
	}
	fs := &session{id: id, log: log, cwd: p.Cwd, mcp: mcp}
	// The fork keeps the controls its kept history last set.
	for _, r := range kept {
		if r.Type == recControls {
			fs.restoreControls(r)
		}
	}
	a.mu.Lock()
	a.sessions[id] = fs
	a.mu.Unlock()
	if err := a.sendCommands(ctx, id); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	c := fs.getControls()
	return acp.UnstableForkSessionResponse{SessionId: acp.SessionId(id), Modes: a.modeState(c),
		ConfigOptions: a.unstableConfigOptions(c)}, nil
}
