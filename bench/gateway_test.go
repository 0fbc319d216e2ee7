package bench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/modelstub"
)

// The gateway bench's request bodies are Messages API requests of at least
// the size asked, streaming or not, ending with the user's "hello".
func TestAnthropicBodySizeAndShape(t *testing.T) {
	for _, size := range []int{0, 100, 32 << 10} {
		for _, stream := range []bool{false, true} {
			b := anthropicBody(stream, size)
			var req struct {
				Stream   bool `json:"stream"`
				Messages []struct {
					Role, Content string
				} `json:"messages"`
			}
			if err := json.Unmarshal([]byte(b), &req); err != nil {
				t.Fatalf("size %d: not JSON: %v", size, err)
			}
			last := req.Messages[len(req.Messages)-1]
			if len(b) < size || req.Stream != stream || last.Role != "user" || last.Content != "hello" {
				t.Fatalf("size %d, stream %v: %d bytes, %+v", size, stream, len(b), req)
			}
		}
	}
}

// What the gateway adds is its percentile less the straight one's, at
// each percentile.
func TestGatewayFiguresAddedPerPercentile(t *testing.T) {
	var direct, via []time.Duration
	for i := range 100 {
		direct = append(direct, time.Duration(i+1)*time.Millisecond)
		via = append(via, time.Duration(2*(i+1))*time.Millisecond)
	}
	f := figures(direct, via)
	if f.DirectP50Ms != 50 || f.DirectP90Ms != 90 || f.DirectP99Ms != 99 || f.GatewayP50Ms != 100 ||
		f.AddedP50Ms != 50 || f.AddedP90Ms != 90 || f.AddedP99Ms != 99 {
		t.Fatalf("figures: %+v", f)
	}
}

// flushCounter counts an answer's flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// The stand-in plays back the answer it made for the first call with a
// path and body: the same status, headers and bytes, flushed event by
// event as the stand-in flushed them; another body gets its own answer.
func TestStandInPlaysBackItsAnswer(t *testing.T) {
	var direct modelstub.Server
	stub := &benchStub{}
	// The stand-in numbers its messages; the rest is the same answer.
	ids := regexp.MustCompile(`"msg_[a-z0-9_]+"`)
	text := func(w *flushCounter) string { return ids.ReplaceAllString(w.Body.String(), `"msg"`) }
	serve := func(h http.Handler, body string) *flushCounter {
		w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body)))
		return w
	}
	for _, stream := range []bool{true, false} {
		body := anthropicBody(stream, 1000)
		want := serve(&direct, body)
		for i := range 3 {
			got := serve(stub, body)
			if got.Code != want.Code || text(got) != text(want) ||
				got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Fatalf("stream %v, call %d: %d %q, want %d %q", stream, i, got.Code, got.Body, want.Code, want.Body)
			}
			if stream && (got.flushes != want.flushes || got.flushes < 3) {
				t.Fatalf("call %d flushed %d times, the stand-in %d", i, got.flushes, want.flushes)
			}
		}
	}
	if len(stub.answers) != 2 {
		t.Fatalf("%d answers made, want one a body", len(stub.answers))
	}
}
