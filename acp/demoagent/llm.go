package demoagent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
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

// fetchTimeout bounds the demo agent's fetch.
const fetchTimeout = 10 * time.Second

// fetch GETs URL through the proxy $HTTP_PROXY names (docs/api.md,
// Network policy), even for a loopback URL, which Go's own environment
// proxy leaves direct.
func (t *turn) fetch(args string) error {
	proxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	if p := os.Getenv("HTTP_PROXY"); p != "" {
		u, err := url.Parse(p)
		if err != nil {
			return t.say("fetch: " + err.Error())
		}
		proxy = http.ProxyURL(u)
	}
	return t.get(strings.TrimSpace(args), proxy)
}

// fetchDirect GETs URL without a proxy.
func (t *turn) fetchDirect(args string) error {
	return t.get(strings.TrimSpace(args), func(*http.Request) (*url.URL, error) { return nil, nil })
}

// get GETs target through proxy and says "fetch: STATUS BODY".
func (t *turn) get(target string, proxy func(*http.Request) (*url.URL, error)) error {
	req, err := http.NewRequestWithContext(t.ctx, http.MethodGet, target, nil)
	if err != nil {
		return t.say("fetch: " + err.Error())
	}
	c := &http.Client{Timeout: fetchTimeout, Transport: &http.Transport{Proxy: proxy, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return t.say("fetch: error")
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return t.say("fetch: " + strconv.Itoa(resp.StatusCode) + " " + string(b))
}
