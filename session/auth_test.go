package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"

	live "github.com/berth-sh/berth/session/live"
)

func TestNeedsAuthAtSessionNewWaitsForAuthenticate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-auth"})
	if s.State != berth.StateStarting || s.Badge != berth.BadgeNeedsAuth || s.StopReason != "" {
		t.Fatalf("created %s/%s (%s), want starting/needs_auth", s.State, s.Badge, s.StopReason)
	}
	if ms := acp.AuthMethodsOf(s.ACP.AuthMethods); len(ms) != 1 || ms[0].ID != "demo-login" || len(s.ACP.AgentInfo) == 0 {
		t.Fatalf("acp = %+v", s.ACP)
	}
	if _, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo hi"}); !berth.IsCode(err, berth.EConflict) || !strings.Contains(err.Error(), "authenticat") {
		t.Fatalf("prompt before authenticate = %v, want conflict", err)
	}
	if _, err := e.m.Authenticate(ctx, s.ID, "nope"); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "demo-login") {
		t.Fatalf("unknown method = %v, want invalid naming demo-login", err)
	}
	got, err := e.m.Authenticate(ctx, s.ID, "demo-login")
	if err != nil || got.State != berth.StateActive || got.Badge != berth.BadgeIdle || got.ACP.SessionID == "" {
		t.Fatalf("authenticate = %+v, %v; want active/idle with a conversation", got, err)
	}
	if len(ofType(e.events(s.ID), berth.EventSessionStarted)) != 1 {
		t.Fatalf("log = %v, want one session_started", types(e.events(s.ID)))
	}
	if r := e.prompt(s.ID, "echo hi"); r.StopReason != berth.TurnEndTurn || r.Text != "hi" {
		t.Fatalf("turn after authenticate = %+v", r)
	}
}

func TestPromptAuthRequiredKeepsDataAndBadgeUntilATurnEndsWell(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-auth"})
	if _, err := e.m.Authenticate(ctx, s.ID, "demo-login"); err != nil {
		t.Fatal(err)
	}
	e.prompt(s.ID, "logout")
	r := e.prompt(s.ID, "echo hi")
	if r.StopReason != berth.TurnError || r.Error == nil || r.Error.Code != "auth_required" || !strings.Contains(string(r.Error.Data), "expired") {
		t.Fatalf("turn = %+v (error %+v), want error auth_required with the agent's data", r, r.Error)
	}
	if cur, _ := e.m.GetSession(ctx, s.ID); cur.State != berth.StateActive || cur.Badge != berth.BadgeNeedsAuth {
		t.Fatalf("after auth_required: %s/%s, want active/needs_auth", cur.State, cur.Badge)
	}
	ended := ofType(e.events(s.ID), berth.EventTurnEnded)
	var d live.TurnEndedData
	if err := json.Unmarshal(ended[len(ended)-1].Data, &d); err != nil || d.Error == nil || !strings.Contains(string(d.Error.Data), "expired") {
		t.Fatalf("turn_ended = %s", ended[len(ended)-1].Data)
	}
	if got, err := e.m.Authenticate(ctx, s.ID, "demo-login"); err != nil || got.Badge != berth.BadgeNeedsAuth {
		t.Fatalf("authenticate = %+v, %v; the badge stays until a turn ends well", got, err)
	}
	if r := e.prompt(s.ID, "echo ok"); r.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn after authenticate = %+v", r)
	}
	if cur, _ := e.m.GetSession(ctx, s.ID); cur.Badge != berth.BadgeIdle {
		t.Fatalf("badge after a good turn = %s", cur.Badge)
	}
}

func TestStopAndResumeAWaitingSessionRetriesTheStart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-auth"})
	stopped, err := e.m.StopSession(ctx, s.ID)
	if err != nil || stopped.State != berth.StateStopped || !stopped.Resumable {
		t.Fatalf("stop = %+v, %v", stopped, err)
	}
	again, err := e.m.ResumeSession(ctx, s.ID)
	if err != nil || again.State != berth.StateStarting || again.Badge != berth.BadgeNeedsAuth {
		t.Fatalf("resume = %+v, %v; want it waiting for authenticate again", again, err)
	}
	if got, err := e.m.Authenticate(ctx, s.ID, "demo-login"); err != nil || got.State != berth.StateActive {
		t.Fatalf("authenticate = %+v, %v", got, err)
	}
}

func TestStartupFailedKeepsWhatTheAgentSaidAndIsNotResumable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-failnew"})
	if s.State != berth.StateStopped || s.StopReason != berth.StopStartupFailed {
		t.Fatalf("created %s/%s, want stopped/startup_failed", s.State, s.StopReason)
	}
	if len(s.ACP.AgentInfo) == 0 || !strings.Contains(string(s.ACP.AuthMethods), "demo-login") {
		t.Errorf("acp = %+v, want agent_info and auth_methods kept", s.ACP)
	}
	if s.Failure == nil || !strings.Contains(s.Failure.Message, "Connection error") {
		t.Errorf("failure = %+v, want the error's data in it", s.Failure)
	}
	if s.Resumable {
		t.Error("a session whose agent never opened a conversation says resumable")
	}
	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil || got.Resumable || len(got.ACP.AgentInfo) == 0 {
		t.Errorf("stored = %+v, %v", got, err)
	}
	if _, err := e.m.ResumeSession(ctx, s.ID); !berth.IsCode(err, berth.EConflict) {
		t.Errorf("resume = %v, want conflict", err)
	}
}
