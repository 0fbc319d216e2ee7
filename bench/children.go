package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// childrenResult is what --children measures (docs/api.md, "Children"): a spawn
// until the child is active, and a prompt with wait to a child sent by
// its parent's agent through the berth MCP server against the same
// prompt sent to the child over the API.
type childrenResult struct {
	Children     int     `json:"children,omitempty"`
	SpawnP50Ms   float64 `json:"spawn_active_p50_ms,omitempty"`
	SpawnP99Ms   float64 `json:"spawn_active_p99_ms,omitempty"`
	ChildPrompts int     `json:"child_prompts,omitempty"`
	MCPPromptP50 float64 `json:"mcp_prompt_child_wait_p50_ms,omitempty"`
	MCPPromptP99 float64 `json:"mcp_prompt_child_wait_p99_ms,omitempty"`
	APIPromptP50 float64 `json:"api_prompt_wait_p50_ms,omitempty"`
	APIPromptP99 float64 `json:"api_prompt_wait_p99_ms,omitempty"`
}

// benchChildren spawns n children of one demo parent over the API, timing
// each until it is active, then sends rounds prompts to the first child,
// alternately as the parent's `mcp berth prompt_child … wait` turn and
// as a direct prompt?wait=true, timing each until its answer.
func benchChildren(ctx context.Context, c *bclient.Client, sandbox string, n, rounds int, res *childrenResult, progress io.Writer) error {
	parent, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
	if err != nil {
		return err
	}
	if parent.State != berth.StateActive {
		return fmt.Errorf("bench parent %s did not start: %v", parent.ID, parent.Failure)
	}
	fmt.Fprintf(progress, "spawning %d children…\n", n)
	var spawns []time.Duration
	var first string
	for range n {
		t0 := time.Now()
		kid, err := c.SpawnChild(ctx, parent.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 3600}, "")
		if err != nil {
			return err
		}
		if kid.State != berth.StateActive {
			return fmt.Errorf("bench child %s did not start: %v", kid.ID, kid.Failure)
		}
		spawns = append(spawns, time.Since(t0))
		if first == "" {
			first = kid.ID
		}
	}
	res.Children, res.SpawnP50Ms, res.SpawnP99Ms = n, pct(spawns, 50), pct(spawns, 99)

	fmt.Fprintf(progress, "prompting a child %d times over MCP and over the API…\n", rounds)
	var viaMCP, viaAPI []time.Duration
	for i := range rounds {
		want := fmt.Sprintf("round %d", i)
		args, _ := json.Marshal(berth.PromptChildArgs{ChildID: first, Text: "echo " + want, Wait: true})
		t0 := time.Now()
		turn, err := c.PromptWait(ctx, parent.ID, berth.PromptRequest{Text: "mcp berth prompt_child " + string(args)})
		if err != nil {
			return err
		}
		if !strings.Contains(turn.Text, want) {
			return fmt.Errorf("prompt_child over MCP answered %q", turn.Text)
		}
		viaMCP = append(viaMCP, time.Since(t0))
		t0 = time.Now()
		turn, err = c.PromptWait(ctx, first, berth.PromptRequest{Text: "echo " + want})
		if err != nil {
			return err
		}
		if turn.Text != want {
			return fmt.Errorf("the API prompt answered %q", turn.Text)
		}
		viaAPI = append(viaAPI, time.Since(t0))
	}
	res.ChildPrompts = rounds
	res.MCPPromptP50, res.MCPPromptP99 = pct(viaMCP, 50), pct(viaMCP, 99)
	res.APIPromptP50, res.APIPromptP99 = pct(viaAPI, 50), pct(viaAPI, 99)
	_, err = c.StopSession(ctx, parent.ID)
	return err
}

// printChildren writes --children's figures.
func printChildren(w io.Writer, r childrenResult) {
	if r.Children == 0 {
		return
	}
	fmt.Fprintf(w, "spawn→child active, %d children\tp50 %.2f ms\tp99 %.2f ms\n", r.Children, r.SpawnP50Ms, r.SpawnP99Ms)
	if r.ChildPrompts > 0 {
		fmt.Fprintf(w, "prompt_child wait over MCP (parent's turn)\tp50 %.2f ms\tp99 %.2f ms\n", r.MCPPromptP50, r.MCPPromptP99)
		fmt.Fprintf(w, "  the same prompt over the API\tp50 %.2f ms\tp99 %.2f ms\n", r.APIPromptP50, r.APIPromptP99)
	}
}
