package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
)

// StreamChanges implements berth.SessionService over the fake's feed.
func (f *fakeService) StreamChanges(_ context.Context, lastEventID string) (berth.ChangeStream, error) {
	return f.feed.Subscribe(lastEventID)
}

// publishSession publishes a session change with a Session JSON whose name
// is name.
func (f *fakeService) publishSession(typ, name string) string {
	data, _ := json.Marshal(berth.Session{ID: "ses_1", Name: name, State: berth.StateActive, Badge: berth.BadgeIdle})
	return f.feed.Publish(typ, data)
}

func TestGlobalStreamWireFormat(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{PingInterval: 20 * time.Millisecond}, "")
	resp := openStream(t, s, "/v1/events/stream")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("answer %d %q", resp.StatusCode, ct)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": ping\n" {
		t.Fatalf("first line = %q, %v; want a ping", line, err)
	}
	f.publishSession(berth.ChangeSessionCreated, "a")
	f.publishSession(berth.ChangeSessionUpdated, "b")
	frames, _, err := readFrames(t, br, 2)
	if err != nil {
		t.Fatal(err)
	}
	epoch := f.feed.Epoch()
	var sess berth.Session
	if frames[0].id != epoch+"-1" || frames[0].event != "session_created" || frames[1].id != epoch+"-2" ||
		frames[1].event != "session_updated" || json.Unmarshal([]byte(frames[1].data), &sess) != nil || sess.Name != "b" {
		t.Fatalf("frames: %+v", frames)
	}

	// Last-Event-ID resumes right after it, and ?after= does the same.
	f.publishSession(berth.ChangeSessionDeleted, "c")
	for _, resp := range []*http.Response{
		openStream(t, s, "/v1/events/stream", "Last-Event-ID", epoch+"-1"),
		openStream(t, s, "/v1/events/stream?after="+epoch+"-1"),
	} {
		frames, _, err := readFrames(t, resp.Body, 2)
		if err != nil || frames[0].id != epoch+"-2" || frames[1].id != epoch+"-3" || frames[1].event != "session_deleted" {
			t.Fatalf("resumed: %+v, %v", frames, err)
		}
	}

	// Another daemon's id: resync first, with the newest id, then what follows.
	resp = openStream(t, s, "/v1/events/stream", "Last-Event-ID", "00000000deadbeef-2")
	br = bufio.NewReader(resp.Body)
	frames, _, err = readFrames(t, br, 1)
	var rs berth.Resync
	if err != nil || frames[0].event != "resync" || frames[0].id != epoch+"-3" ||
		json.Unmarshal([]byte(frames[0].data), &rs) != nil || rs.Reason != berth.ResyncRestart || rs.Message == "" {
		t.Fatalf("resync: %+v, %v", frames, err)
	}
	f.publishSession(berth.ChangeSessionUpdated, "d")
	if frames, _, err = readFrames(t, br, 1); err != nil || frames[0].id != epoch+"-4" {
		t.Fatalf("after resync: %+v, %v", frames, err)
	}

	// A malformed id is refused with a clear error.
	resp = openStream(t, s, "/v1/events/stream", "Last-Event-ID", "17")
	var body errorBody
	if resp.StatusCode != 400 || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error.Code != berth.EInvalid {
		t.Fatalf("bad id: %d %+v", resp.StatusCode, body)
	}
}

func TestClientStreamChangesResumesAcrossAReconnection(t *testing.T) {
	// One service (one feed, as while the daemon runs) served by two
	// servers in turn on the same address: the connection drops between.
	f := newFakeService()
	s1, done1 := serveTCP(t, f, ServerOptions{Token: testToken})
	addr := s1.Addr()
	c := tcpClient(addr, testToken, fastReconnect)
	defer c.Close()

	for i := range 3 {
		f.publishSession(berth.ChangeSessionUpdated, fmt.Sprint(i+1))
	}
	var names []string
	var s2 *Server
	var done2 <-chan error
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ch, err := range c.Changes(ctx, f.feed.Epoch()+"-0") {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var sess berth.Session
		if err := json.Unmarshal(ch.Data, &sess); err != nil || ch.Type != berth.ChangeSessionUpdated {
			t.Fatalf("change %+v: %v", ch, err)
		}
		names = append(names, sess.Name)
		if sess.Name == "2" {
			// Cut the connection; changes go on meanwhile.
			if err := s1.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-done1
			f.publishSession(berth.ChangeSessionUpdated, "4")
			s2 = NewServer(f, ServerOptions{Token: testToken})
			if err := s2.Listen(addr, ""); err != nil {
				t.Fatal(err)
			}
			done2 = serveAsync(s2)
		}
		if sess.Name == "4" {
			break
		}
	}
	if fmt.Sprint(names) != "[1 2 3 4]" {
		t.Fatalf("names = %v, want [1 2 3 4]: no gap, no duplicate", names)
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done2
}

func TestClientStreamChangesSaysResyncAfterARestart(t *testing.T) {
	first := newFakeService()
	first.publishSession(berth.ChangeSessionCreated, "a")
	last := first.feed.Epoch() + "-1"
	// A daemon restart: a new service, a new feed, the client's old id.
	second := newFakeService()
	s2 := startServer(t, second, ServerOptions{}, "")
	c := newTestClient(t, s2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for ch, err := range c.Changes(ctx, last) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ch.Type)
		if len(got) == 2 {
			break
		}
		second.publishSession(berth.ChangeSessionUpdated, "b")
	}
	if got[0] != berth.ChangeResync || got[1] != berth.ChangeSessionUpdated {
		t.Fatalf("changes = %v, want resync first", got)
	}
}

func TestGlobalStreamLeavesNoGoroutineAfterDisconnect(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{PingInterval: time.Hour}, "")
	c := tcpClient("http://"+s.Addr(), testToken)
	// The server is serving (its accept loop runs) before the count.
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// More than one change may come before the cancel: seen closes once.
		var once sync.Once
		for _, err := range c.Changes(ctx, "") {
			if err != nil {
				return
			}
			once.Do(func() { close(seen) })
		}
	}()
	// Publish until the stream is surely open and delivering.
	for delivered := false; !delivered; {
		f.publishSession(berth.ChangeSessionUpdated, "x")
		select {
		case <-seen:
			delivered = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	<-done
	c.Close()
	// The handler, blocked in Next with no change coming, must return too.
	goleak.VerifyNone(t, before)
}
