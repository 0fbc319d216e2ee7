package acp

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/acp/demoagent"
)

// inProcessAgent runs the demo agent on pipes and returns a client of it;
// stop closes the connection and waits for the agent to return.
func inProcessAgent(t *testing.T, h ClientHandler, stateDir string) (c *Client, stop func()) {
	t.Helper()
	inR, inW := io.Pipe()   // client → agent
	outR, outW := io.Pipe() // agent → client
	done := make(chan struct{})
	go func() {
		defer close(done)
		demoagent.Main([]string{"--state-dir", stateDir}, inR, outW, io.Discard)
		outW.Close()
	}()
	c = NewClient(Pipe{R: outR, W: inW}, h, Options{})
	c.Start()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			c.Close()
			inR.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// The replay of session/load arrives, whole and in order, before the load
// answers: nothing the agent sends ahead of an answer is lost.
func TestLoadSessionReplaysBeforeItAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, cwd := t.TempDir(), t.TempDir()

	first := &updates{}
	c, stop := inProcessAgent(t, first, dir)
	init, err := c.Initialize(ctx, Implementation{Name: "test", Version: "1"})
	if err != nil || init.ProtocolVersion != 1 || !init.Capabilities().LoadSession {
		t.Fatalf("initialize = %+v, %v", init, err)
	}
	ns, err := c.NewSession(ctx, cwd, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Prompt(ctx, ns.SessionID, TextBlock("echo remembered\nthink quietly"))
	if err != nil || resp.StopReason != "end_turn" {
		t.Fatalf("prompt = %+v, %v", resp, err)
	}
	stop()

	second := &updates{}
	c2, _ := inProcessAgent(t, second, dir)
	if _, err := c2.Initialize(ctx, Implementation{Name: "test", Version: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := c2.LoadSession(ctx, ns.SessionID, cwd, nil); err != nil {
		t.Fatalf("load: %v", err)
	}
	second.mu.Lock()
	got := append([]Update(nil), second.got...)
	second.mu.Unlock()
	var kinds, texts []string
	for _, u := range got {
		if u.Kind == UpdateAvailableCommands {
			// Announced at each load, not part of the conversation.
			continue
		}
		kinds = append(kinds, u.Kind)
		texts = append(texts, u.Text())
	}
	want := []string{UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk}
	if len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] ||
		texts[1] != "remembered" || texts[2] != "quietly" {
		t.Fatalf("replayed before the answer: %v %q", kinds, texts)
	}
	if err := c2.LoadSession(ctx, "demo-unknown", cwd, nil); err == nil {
		t.Fatal("loading an unknown session succeeded")
	}
	if resp, err := c2.Prompt(ctx, ns.SessionID, TextBlock("echo again")); err != nil || resp.StopReason != "end_turn" {
		t.Fatalf("prompt after load = %+v, %v", resp, err)
	}
}
