package bench

import (
	"encoding/json"
	"testing"
	"time"
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
