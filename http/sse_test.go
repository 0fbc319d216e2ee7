package http

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// openStream opens an SSE stream on the server and returns the response;
// the body is closed when the test ends.
func openStream(t *testing.T, s *Server, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		resp.Body.Close()
		tr.CloseIdleConnections()
	})
	return resp
}

// sseFrame is one event as written on the wire.
type sseFrame struct {
	id, event, data string
}

// readFrames reads frames until n events were read (n < 0: until the body
// ends) and returns them with the comments seen and the error that ended
// the body (nil after n events).
func readFrames(t *testing.T, body io.Reader, n int) (frames []sseFrame, comments []string, err error) {
	t.Helper()
	br := bufio.NewReader(body)
	var cur sseFrame
	for n < 0 || len(frames) < n {
		line, err := br.ReadString('\n')
		if err != nil {
			return frames, comments, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur != (sseFrame{}) {
				frames = append(frames, cur)
			}
			cur = sseFrame{}
		case strings.HasPrefix(line, ":"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Fatalf("two data lines in one event: %q", line)
			}
			cur.data = line[6:]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return frames, comments, nil
}

// checkSeqs checks that frames are events from..to in order, with ids,
// types and data that agree.
func checkSeqs(t *testing.T, frames []sseFrame, from, to int64) {
	t.Helper()
	if int64(len(frames)) != to-from+1 {
		t.Fatalf("got %d events, want %d..%d: %v", len(frames), from, to, frames)
	}
	for i, f := range frames {
		want := from + int64(i)
		var ev berth.Event
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatalf("event %d data: %v", i, err)
		}
		if f.id != fmt.Sprint(want) || ev.Seq != want || f.event != ev.Type || ev.SessionID != "ses_1" {
			t.Fatalf("event %d = id %s event %s data %s, want seq %d", i, f.id, f.event, f.data, want)
		}
	}
}

func TestSSEReplayAndEOF(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 5, berth.EventAgentMessage)
	f.stop("ses_1")
	s := startServer(t, f, ServerOptions{}, "")

	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream?after=2")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	frames, _, err := readFrames(t, resp.Body, -1)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want a clean end", err)
	}
	checkSeqs(t, frames, 3, 5)
	if f.lastStreamFrom != 2 {
		t.Errorf("stream started after %d, want 2", f.lastStreamFrom)
	}

	// Last-Event-ID wins over ?after=.
	resp = openStream(t, s, "/v1/sessions/ses_1/events/stream?after=1", "Last-Event-ID", "4")
	frames, _, err = readFrames(t, resp.Body, -1)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	checkSeqs(t, frames, 5, 5)
	if f.lastStreamFrom != 4 {
		t.Errorf("stream started after %d, want 4", f.lastStreamFrom)
	}
}

func TestSSEBadPositionAndMissingSession(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{}, "")
	for _, tt := range []struct {
		path, header string
		status       int
	}{
		{"/v1/sessions/ses_1/events/stream", "x", 400},
		{"/v1/sessions/ses_1/events/stream", "-3", 400},
		{"/v1/sessions/ses_1/events/stream?after=x", "", 400},
		{"/v1/sessions/nope/events/stream", "", 404},
	} {
		resp := openStream(t, s, tt.path, "Last-Event-ID", tt.header)
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" || body["error"] == nil {
			t.Errorf("%s (Last-Event-ID %q) = %d %v", tt.path, tt.header, resp.StatusCode, body)
		}
	}
}

func TestSSEPingThenLiveEventsInOrder(t *testing.T) {
	f := newFakeService()
	f.pageSize = 7
	s := startServer(t, f, ServerOptions{PingInterval: 20 * time.Millisecond}, "")
	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream")
	br := bufio.NewReader(resp.Body)

	// Nothing to send: a ping comment comes.
	line, err := br.ReadString('\n')
	if err != nil || line != ": ping\n" {
		t.Fatalf("first line = %q, %v; want a ping", line, err)
	}

	// Events appended while the stream is open all arrive, in order.
	const n = 200
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for range n / 10 {
			f.appendEvents("ses_1", 10, berth.EventAgentMessage)
		}
		f.stop("ses_1")
	}()
	frames, comments, err := readFrames(t, br, -1)
	<-appended
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v", err)
	}
	checkSeqs(t, frames, 1, n)
	for i, c := range comments {
		last := i == len(comments)-1
		if last && c != endComment || !last && c != ": ping" {
			t.Errorf("comment %d of %d = %q (pings, then %q last)", i+1, len(comments), c, endComment)
		}
	}
}

func TestSSEDataIsOneLine(t *testing.T) {
	f := newFakeService()
	ev := berth.NewEvent("ses_1", "", berth.EventAgentMessage, json.RawMessage("{\n  \"text\": \"a\\nb\"\n}"))
	ev.Seq = 1
	f.events["ses_1"] = []berth.Event{ev}
	f.stop("ses_1")
	s := startServer(t, f, ServerOptions{}, "")
	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream")
	frames, _, err := readFrames(t, resp.Body, -1)
	if !errors.Is(err, io.EOF) || len(frames) != 1 || !strings.Contains(frames[0].data, `"data":{"text":"a\nb"}`) {
		t.Fatalf("frames %v, %v", frames, err)
	}
}

// An event is written as one SSE frame whatever its type holds: a line
// break in the type is dropped, not let end the field.
func TestWriteEventIsOneFrame(t *testing.T) {
	for _, typ := range []string{berth.EventAgentMessage, "odd\r\ntype\n"} {
		ev := berth.NewEvent("ses_1", "", typ, json.RawMessage(`{"text":"a\nb"}`))
		ev.Seq = 42
		var b strings.Builder
		if err := writeEvent(&b, ev); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(ev)
		want := "id: 42\nevent: " + strings.NewReplacer("\r", "", "\n", "").Replace(typ) + "\ndata: " + string(data) + "\n\n"
		if b.String() != want {
			t.Errorf("type %q: wrote %q, want %q", typ, b.String(), want)
		}
	}
}

func TestSSEStreamErrorBecomesErrorEvent(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 2, berth.EventAgentMessage)
	f.streamErr = berth.Errorf(berth.EUnavailable, "store went away")
	s := startServer(t, f, ServerOptions{}, "")
	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream")
	frames, _, err := readFrames(t, resp.Body, -1)
	if !errors.Is(err, io.EOF) || len(frames) != 3 {
		t.Fatalf("frames %v, %v", frames, err)
	}
	checkSeqs(t, frames[:2], 1, 2)
	last := frames[2]
	if last.event != "error" || last.id != "" || !strings.Contains(last.data, `"code":"unavailable"`) {
		t.Errorf("error frame = %+v", last)
	}
}

func TestSSEEndsOnShutdown(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 1, berth.EventAgentMessage)
	s, done := serveTCP(t, f, ServerOptions{Token: testToken})
	resp := openStream(t, s, "/v1/sessions/ses_1/events/stream")
	br := bufio.NewReader(resp.Body)
	if _, _, err := readFrames(t, br, 1); err != nil {
		t.Fatal(err)
	}
	// A Close that waited on the open stream would end with ctx's error.
	if closeErr, serveErr := closeServer(s, done, 30*time.Second); closeErr != nil || serveErr != nil {
		t.Fatalf("Close = %v (it waited on the open stream), Serve = %v", closeErr, serveErr)
	}
	// The connection is dropped, not ended: a client must reconnect.
	if _, _, err := readFrames(t, br, -1); errors.Is(err, io.EOF) || err == nil {
		t.Errorf("stream after shutdown ended with %v, want a cut connection", err)
	}
}

func TestPromptWaitEndsOnShutdown(t *testing.T) {
	f := newFakeService()
	f.waitBlocks = true
	s, done := serveTCP(t, f, ServerOptions{Token: testToken})
	c := tcpClient(s.Addr(), testToken)
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := c.PromptWait(context.Background(), "ses_1", berth.PromptRequest{Text: "hi"})
		errc <- err
	}()
	awaitWaitTurn(t, f, "the prompt")
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := <-errc; berth.ErrorCode(err) != berth.EUnavailable {
		t.Errorf("PromptWait during shutdown = %v, want unavailable", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

// Review finding: logging out did not end a stream opened with the sign-in
// cookie. Now each stream checks the sign-in at every batch or ping and is
// cut once it ended.
func TestCookieStreamsEndAtLogout(t *testing.T) {
	s := startServer(t, newFakeService(), ServerOptions{PingInterval: 50 * time.Millisecond}, "")
	for _, path := range []string{"/v1/sessions/ses_1/events/stream", "/v1/events/stream"} {
		status, body, hdr := callTCP(t, s.Handler(), "POST", "/v1/login", `{"token":"`+testToken+`"}`, "Content-Type", "application/json")
		if status != 204 {
			t.Fatalf("login = %d %v", status, body)
		}
		cookie := CookieName + "=" + sessionCookie(t, hdr).Value
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+path, nil)
		req.Header.Set("Cookie", cookie)
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s with the cookie = %d", path, resp.StatusCode)
		}
		// The stream is alive: a ping arrives.
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s ended before logout: %v", path, err)
			}
			if strings.HasPrefix(line, ": ping") {
				break
			}
		}
		if status, _, _ := callTCP(t, s.Handler(), "POST", "/v1/logout", "", "Cookie", cookie); status != 204 {
			t.Fatalf("logout = %d", status)
		}
		// The stream ends (cut) soon after: the read below returns rather
		// than waiting for the test's deadline.
		ended := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, br)
			ended <- err
		}()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Errorf("%s still open 10 s after logout", path)
			resp.Body.Close()
			<-ended
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
}
