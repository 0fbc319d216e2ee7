package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
)

// A session of the demo agent, driven from Go: create it, prompt it, and
// follow its events until the turn ends.
func Example() {
	ctx := context.Background()
	// A daemon in this process on a temporary home (berth serve does the
	// same with daemon.Open); any running daemon would do.
	_, addr, stop, err := exampleDaemon(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	c, err := client.New(addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("session", s.State)
	res, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: "think about it\necho hello from the agent"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The events from the session's position before the prompt on: the
	// stream reconnects by itself if the connection drops.
	for ev, err := range c.Events(ctx, s.ID, s.LastSeq) {
		if err != nil {
			fmt.Println(err)
			return
		}
		var data struct {
			Text       string `json:"text"`
			StopReason string `json:"stop_reason"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		switch ev.Type {
		case berth.EventAgentThought, berth.EventAgentMessage:
			fmt.Printf("%s: %s\n", ev.Type, data.Text)
		case berth.EventTurnEnded:
			fmt.Printf("%s: %s\n", ev.Type, data.StopReason)
		}
		if ev.Type == berth.EventTurnEnded && ev.TurnID == res.TurnID {
			break
		}
	}
	// A turn already over answers at once, rebuilt from the log.
	turn, err := c.WaitTurn(ctx, s.ID, res.TurnID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("turn: %s %q\n", turn.StopReason, turn.Text)
	// Output:
	// session active
	// agent_thought: about it
	// agent_message: hello from the agent
	// turn_ended: end_turn
	// turn: end_turn "hello from the agent"
}

// Errors keep the daemon's code, as the session manager's do.
func ExampleClient_GetSession() {
	ctx := context.Background()
	_, addr, stop, err := exampleDaemon(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	c, _ := client.New(addr)
	defer c.Close()

	_, err = c.GetSession(ctx, "ses_missing")
	var e *berth.Error
	fmt.Println(berth.ErrorCode(err), errors.As(err, &e), e.Message)
	// Output:
	// not_found true session ses_missing not found
}

// turnText is written against berth.SessionService: it runs on the
// daemon's own session manager and on a client of that daemon alike.
func turnText(ctx context.Context, svc berth.SessionService, id, turnID string) (string, error) {
	turn, err := svc.WaitTurn(ctx, id, turnID)
	if err != nil {
		return "", err
	}
	return turn.Text, nil
}

// One function, two services: the session manager in the daemon's process
// and a client of its socket answer the same.
func ExampleClient_sessionService() {
	ctx := context.Background()
	d, addr, stop, err := exampleDaemon(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	c, _ := client.New(addr)
	defer c.Close()

	s, _ := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	res, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo same answer"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, svc := range []berth.SessionService{d.Manager(), c} {
		text, err := turnText(ctx, svc, s.ID, res.TurnID)
		fmt.Printf("%T: %q %v\n", svc, text, err)
	}
	// Output:
	// *session.Manager: "same answer" <nil>
	// *client.Client: "same answer" <nil>
}
