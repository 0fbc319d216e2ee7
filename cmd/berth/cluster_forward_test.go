package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// sseFollower reads one SSE stream of a node in the background.
type sseFollower struct {
	events chan berth.Event
	errc   chan error
	// stop closes the stream.
	stop func()
}

// follow opens path's SSE stream on s from after on; the test's end closes it.
func follow(t *testing.T, s *server, path string, after int64) *sseFollower {
	t.Helper()
	f := &sseFollower{events: make(chan berth.Event, 100000), errc: make(chan error, 1)}
	var last string
	f.stop = s.followSSE(t, path+"?after="+strconv.FormatInt(after, 10), func(_, id, data string) bool {
		last = data
		var ev berth.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil || strconv.FormatInt(ev.Seq, 10) != id {
			f.errc <- fmt.Errorf("bad SSE event (id %s): %q %v", id, data, err)
			return false
		}
		f.events <- ev
		return true
	}, func(err error) {
		select {
		case f.errc <- fmt.Errorf("the stream ended (%v) after %q", err, last):
		default:
			// A bad event ended it and said so.
		}
	})
	return f
}

// until collects the follower's events until one satisfies stop, failing
// after within.
func (f *sseFollower) until(t *testing.T, within time.Duration, stop func(berth.Event) bool) []berth.Event {
	t.Helper()
	var out []berth.Event
	timeout := time.After(within)
	for {
		select {
		case ev := <-f.events:
			out = append(out, ev)
			if stop(ev) {
				return out
			}
		case err := <-f.errc:
			// Events sent before the end come first.
			for len(f.events) > 0 {
				ev := <-f.events
				out = append(out, ev)
				if stop(ev) {
					f.errc <- err
					return out
				}
			}
			t.Fatalf("after %d events: %v", len(out), err)
		case <-timeout:
			t.Fatalf("no matching event within %s (%d events read)", within, len(out))
		}
	}
}

// followChanges reads a node's all-sessions stream in the background and
// sends the Session of every session_created and session_updated on the
// channel.
func followChanges(t *testing.T, s *server) <-chan berth.Session {
	t.Helper()
	out := make(chan berth.Session, 10000)
	s.followSSE(t, "/v1/events/stream", func(typ, _, data string) bool {
		var sess berth.Session
		if (typ == berth.ChangeSessionUpdated || typ == berth.ChangeSessionCreated) && json.Unmarshal([]byte(data), &sess) == nil {
			out <- sess
		}
		return true
	}, nil)
	return out
}

// rawCall sends a request to a node and returns its status and raw body.
func rawCall(t *testing.T, s *server, method, path, body string) (int, string) {
	t.Helper()
	st, b := s.raw(t, method, path, body)
	return st, string(b)
}

// Three nodes on one PostgreSQL, each with its own user token: a session
// created on A is prompted through B (forwarded to A with the node token)
// and streamed from C, which carries A's events live (woken by NOTIFY,
// read from the store) with no gap and no duplicate, and the session's
// changes on its all-sessions stream; a turn's long poll on C waits on A.
// The owner's errors pass through B unchanged; once A is gone a write
// through B is 503 naming it.
func TestClusterPromptThroughBStreamFromC(t *testing.T) {
	db := freshPostgres(t)
	a, b, c := startNode(t, db, "node-a"), startNode(t, db, "node-b"), startNode(t, db, "node-c")
	if readTokenFile(a.home) == readTokenFile(b.home) {
		t.Fatal("the nodes share a user token: forwarding would prove nothing")
	}
	var sess berth.Session
	if st, _ := a.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, &sess); st != 201 || sess.Node != "node-a" {
		t.Fatalf("create on A = %d node %q\n%s", st, sess.Node, a.log)
	}
	id := sess.ID
	// C follows the session from its start, before anything is prompted,
	// and every session's changes.
	onC := follow(t, c, "/v1/sessions/"+id+"/events/stream", 0)
	changesOnC := followChanges(t, c)

	texts := []string{"echo one", "flood 300 64\necho two", "think hm\necho three"}
	var turns []string
	for i, text := range texts {
		var r berth.TurnResult
		if st, err := b.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]any{"text": text}, &r); st != 200 || err != nil {
			t.Fatalf("prompt %d through B = %d %v\nA:\n%s\nB:\n%s", i, st, err, a.log, b.log)
		}
		want := strings.TrimPrefix(text[strings.LastIndex(text, "\n")+1:], "echo ")
		if !strings.HasSuffix(r.Text, want) || r.StopReason != berth.TurnEndTurn {
			t.Fatalf("prompt %d through B: %+v", i, r)
		}
		turns = append(turns, r.TurnID)
	}
	// B ran nothing itself: A's log has the three turns.
	got := onC.until(t, 30*time.Second, func(ev berth.Event) bool {
		return ev.Type == berth.EventTurnEnded && ev.TurnID == turns[len(turns)-1]
	})
	assertContiguous(t, got)
	onA := a.allEvents(t, id)
	if len(got) > len(onA) {
		t.Fatalf("C streamed %d events, A's log has %d", len(got), len(onA))
	}
	for i, ev := range got {
		if ev.Seq != onA[i].Seq || ev.Type != onA[i].Type || string(ev.Data) != string(onA[i].Data) {
			t.Fatalf("event %d: C streamed %d %s, the log has %d %s", i, ev.Seq, ev.Type, onA[i].Seq, onA[i].Type)
		}
	}

	// C's all-sessions stream carried A's session as it went.
	deadline := time.After(10 * time.Second)
	for seenTurns := false; !seenTurns; {
		select {
		case s := <-changesOnC:
			seenTurns = s.ID == id && s.Node == "node-a" && s.Turns == len(texts) && s.Badge == berth.BadgeIdle
		case <-deadline:
			t.Fatal("C's all-sessions stream did not carry the session after its turns")
		}
	}

	// A turn's long poll asked of a node that does not run it waits on the
	// owner: prompted through B, waited for on C.
	var pr berth.PromptResult
	if st, _ := b.api("POST", "/v1/sessions/"+id+"/prompts", map[string]any{"text": "sleep 300\necho late turn"}, &pr); st != 202 || pr.TurnID == "" {
		t.Fatalf("prompt through B = %d %+v", st, pr)
	}
	var tr berth.TurnResult
	if st, err := c.api("GET", "/v1/sessions/"+id+"/turns/"+pr.TurnID, nil, &tr); st != 200 || err != nil || !strings.HasSuffix(tr.Text, "late turn") {
		t.Fatalf("the turn waited for on C = %d %v %+v", st, err, tr)
	}

	// An error of the owner passes through B as the owner said it.
	stA, bodyA := rawCall(t, a, "POST", "/v1/sessions/"+id+"/cancel", "")
	stB, bodyB := rawCall(t, b, "POST", "/v1/sessions/"+id+"/cancel", "")
	if stA != 409 || stB != stA || bodyB != bodyA {
		t.Fatalf("cancel of an idle session: A %d %s, through B %d %s", stA, bodyA, stB, bodyB)
	}
	// A PATCH through C lands on A.
	if st, body := rawCall(t, c, "PATCH", "/v1/sessions/"+id, `{"name":"renamed-via-c"}`); st != 200 {
		t.Fatalf("PATCH through C = %d %s", st, body)
	}
	if s := a.session(t, id); s.Name != "renamed-via-c" || s.Node != "node-a" {
		t.Fatalf("after the PATCH through C, A has name %q node %q", s.Name, s.Node)
	}
	// berth ls and show on C say which node runs it.
	if out := c.cli(t, "ls"); !strings.Contains(out, "NODE") || !strings.Contains(out, "node-a") {
		t.Fatalf("berth ls on C does not name the node:\n%s", out)
	}
	if out := c.cli(t, "show", id); !strings.Contains(out, "node-a") {
		t.Fatalf("berth show on C does not name the node:\n%s", out)
	}
	var nodes struct {
		Nodes []berth.Node `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(c.cli(t, "nodes", "-o", "json")), &nodes); err != nil || len(nodes.Nodes) != 3 {
		t.Fatalf("berth nodes on C: %+v %v", nodes, err)
	}
	for _, n := range nodes.Nodes {
		if n.State != berth.NodeUp || (n.ID == "node-a") != (n.Sessions == 1) {
			t.Fatalf("berth nodes on C: %+v", nodes.Nodes)
		}
	}

	// A dies: until the others mark it lost, its session's writes cannot
	// reach it, and B says so, naming it.
	_ = syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL)
	_ = a.cmd.Wait()
	st, body := rawCall(t, b, "POST", "/v1/sessions/"+id+"/prompts", `{"text":"echo late"}`)
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || st != 503 || e.Error.Code != berth.EUnavailable ||
		e.Error.Details["node"] != "node-a" || !strings.Contains(e.Error.Message, "node-a") {
		t.Fatalf("a write through B to the dead A = %d %s", st, body)
	}
	// C's stream goes on to the takeover's session_stopped and ends.
	waitFor(t, 3*clusterTTL, "session stopped/node_lost on C", func() bool {
		s := c.session(t, id)
		return s.State == berth.StateStopped && s.StopReason == berth.StopNodeLost
	})
	rest := onC.until(t, 6*clusterTTL, func(ev berth.Event) bool { return ev.Type == berth.EventSessionStopped })
	assertContiguous(t, append(got, rest...))
}
