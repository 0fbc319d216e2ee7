package berthmcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth"
)

// connect serves NewServer(call) in memory and returns a client session.
func connect(t *testing.T, call Caller) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer("test").Connect(WithCaller(ctx, call), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// text is a result's one text block.
func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("result content %+v", r.Content)
	}
	return r.Content[0].(*mcp.TextContent).Text
}

// The five tools are listed with bounded input schemas; arguments within
// them reach the daemon as they are, and its answer comes back as the
// tool's JSON (list_children's as an array).
func TestToolsPassArgumentsAndAnswers(t *testing.T) {
	var got []string
	cs := connect(t, func(_ context.Context, tool string, in, out any) error {
		b, _ := json.Marshal(in)
		got = append(got, tool+" "+string(b))
		switch o := out.(type) {
		case *berth.SpawnChildResult:
			o.ChildID, o.State = "ses_kid", berth.StateActive
		case *berth.ChildrenResult:
			o.Children = []berth.ChildInfo{{ChildID: "ses_kid", Name: "k", State: berth.StateActive, Badge: berth.BadgeIdle}}
		}
		return nil
	})
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if b, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(b), `"additionalProperties":false`) {
			t.Fatalf("%s's schema takes any field: %s", tl.Name, b)
		}
	}
	if strings.Join(names, ",") != "list_children,prompt_child,spawn_child,stop_child,wait_child" {
		t.Fatalf("tools %v", names)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 60, "prompt": "hi", "network": true}})
	if err != nil || r.IsError || !strings.Contains(text(t, r), `"child_id":"ses_kid"`) {
		t.Fatalf("spawn_child = %+v %v", r, err)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_children", Arguments: map[string]any{}})
	if err != nil || r.IsError || !strings.HasPrefix(text(t, r), `[{"child_id":"ses_kid"`) {
		t.Fatalf("list_children = %+v %v", r, err)
	}
	want := []string{`spawn_child {"prompt":"hi","ttl_seconds":60,"network":true}`, `list_children {}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the daemon got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Arguments outside the schemas never reach the daemon and are
// invalid_argument; the daemon's errors are tool errors "CODE: message".
func TestToolErrorsNameTheCode(t *testing.T) {
	called := 0
	cs := connect(t, func(_ context.Context, tool string, _, _ any) error {
		called++
		return &berth.Error{Code: berth.EConflict, Message: "limits.max_children (5) reached"}
	})
	ctx := context.Background()
	for _, p := range []mcp.CallToolParams{
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 0}},
		{Name: "spawn_child", Arguments: map[string]any{}},
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5, "permission_mode": "root"}},
		{Name: "prompt_child", Arguments: map[string]any{"child_id": "ses_x", "text": ""}},
		{Name: "prompt_child", Arguments: map[string]any{"child_id": "../x", "text": "hi"}},
		{Name: "wait_child", Arguments: map[string]any{"child_id": "ses_x", "timeout_seconds": 3601}},
		{Name: "stop_child", Arguments: map[string]any{"child_id": "ses_x", "extra": 1}},
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5, "network": "open"}},
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5, "network": map[string]any{"ask": true}}},
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5, "network": map[string]any{"allow": []any{"a.example"}, "via": "x"}}},
		{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5, "network": map[string]any{"allow": []any{1}}}},
	} {
		r, err := cs.CallTool(ctx, &p)
		if err != nil || !r.IsError || !strings.HasPrefix(text(t, r), berth.EInvalid+": ") {
			t.Fatalf("%s %v = %+v %v", p.Name, p.Arguments, r, err)
		}
	}
	if called != 0 {
		t.Fatalf("%d refused calls reached the daemon", called)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 5}})
	if err != nil || !r.IsError || text(t, r) != "conflict: limits.max_children (5) reached" {
		t.Fatalf("a daemon error = %+v %v", r, err)
	}
}

// spawn_child takes the network of the create body in each of its forms,
// an allow list with ask included, and hands it to the daemon as it came
// (the daemon narrows it to the caller's).
func TestSpawnChildTakesANetworkPolicy(t *testing.T) {
	var got []string
	cs := connect(t, func(_ context.Context, tool string, in, out any) error {
		b, _ := json.Marshal(in)
		got = append(got, string(b))
		out.(*berth.SpawnChildResult).ChildID = "ses_kid"
		return nil
	})
	for _, n := range []any{false, true, map[string]any{"allow": []any{"api.github.com", "127.0.0.1:8080"}, "ask": true}} {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "spawn_child", Arguments: map[string]any{"ttl_seconds": 60, "network": n}})
		if err != nil || r.IsError {
			t.Fatalf("network %v = %+v %v", n, r, err)
		}
	}
	want := []string{`{"ttl_seconds":60}`, `{"ttl_seconds":60,"network":true}`,
		`{"ttl_seconds":60,"network":{"allow":["api.github.com","127.0.0.1:8080"],"ask":true}}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the daemon got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
