package demoagent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// modelTimeout bounds the demo agent's one model call.
const modelTimeout = 30 * time.Second

// llm calls the Anthropic Messages API the agent's environment points
// it at (ANTHROPIC_BASE_URL, with the key ANTHROPIC_API_KEY, as Claude
// Code does) with TEXT as the user's message, and says "llm: STATUS
// ANSWER": the first text of the answer, or its error's message. It shows
// what an agent given berth's model gateway can reach with what it was
// given (docs/api.md, The model gateway).
func (t *turn) llm(args string) error {
	base := os.Getenv("ANTHROPIC_BASE_URL")
	if base == "" {
		return t.say("llm: no ANTHROPIC_BASE_URL")
	}
	body, _ := json.Marshal(map[string]any{"model": "demo", "max_tokens": 64,
		"messages": []map[string]any{{"role": "user", "content": args}}})
	req, err := http.NewRequestWithContext(t.ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return t.say("llm: " + err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		req.Header.Set("x-api-key", key)
	}
	c := &http.Client{Timeout: modelTimeout}
	resp, err := c.Do(req)
	if err != nil {
		return t.say("llm: " + err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var answer struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &answer)
	what := answer.Error.Message
	for _, c := range answer.Content {
		if c.Type == "text" {
			what = c.Text
			break
		}
	}
	return t.say("llm: " + strconv.Itoa(resp.StatusCode) + " " + what)
}
