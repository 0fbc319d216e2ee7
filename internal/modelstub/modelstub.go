// Package modelstub is a stand-in for the model APIs real coding agents
// call, for tests that run those agents offline: the Anthropic Messages API
// (what Claude Code calls through ANTHROPIC_BASE_URL), the OpenAI
// chat-completions API (Qwen Code, OpenCode) and the Gemini API
// (generateContent, streamGenerateContent), streaming (server-sent events)
// and not; and the OpenAI Responses API (Codex, through a model_providers
// entry; OpenCode's openai provider). Every answer reports the same usage, in each
// API's own fields (InputTokens, …), as the API does: streams report it
// where the API's streams do (an OpenAI chat stream only when the request's
// stream_options.include_usage asks).
//
// It answers from the conversation it is sent, with no state of its own, so
// that an agent restarted (a resumed session) gets the same answers:
//
//   - a last user message "write PATH CONTENT" gets a call of the agent's
//     own file-writing tool (found among the tools the request offers:
//     Write, write_file, write…) with PATH and CONTENT in the argument
//     names that tool's schema uses; an agent that writes by patches
//     (Codex, OpenCode on an OpenAI model) gets a call of its apply_patch,
//     or of Codex's code-mode exec calling it, adding PATH;
//   - a tool's result gets the text "wrote it";
//   - anything else gets the text "stub: " and the user's words.
package modelstub

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The usage of every answer, in tokens: input not read from a cache, input
// read from it (cached), input written to it (Anthropic only), and output,
// of which GeminiThoughtsTokens are Gemini's thoughts. Each API reports
// them in its own fields: OpenAI's and Gemini's prompt counts include the
// cached tokens.
const (
	InputTokens          = 11
	CacheReadTokens      = 7
	CacheWriteTokens     = 5
	OutputTokens         = 13
	GeminiThoughtsTokens = 3
)

// Reply is what the stub answers one request with: a text, or a call of
// Tool with Args (JSON arguments) or Input (a freeform tool's input).
type Reply struct {
	Text  string
	Tool  string
	Args  map[string]any
	Input string
}

// writeRequest is a prompt that asks for a file to be written (compiled
// when first used: the demo agent is the berth binary, and every berth
// process would compile it at start).
var writeRequest = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*write (\S+) (.+?)\s*$`) })

// markup is a block of context an agent wraps in tags of its own
// (compiled when first used).
var markup = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<([a-z_-]+)>.*?</([a-z_-]+)>`) })

// writeTools are the names agents give their file-writing tool, best first.
var writeTools = []string{"Write", "write_file", "write"}

// tool is a tool a request offers: its name and its parameters' names.
type tool struct {
	name   string
	params []string
}

// decide is the stub's answer to a conversation whose last user turn says
// texts (toolResult when it carries a tool's result), offering tools.
func decide(texts []string, toolResult bool, tools []tool) Reply {
	if toolResult {
		return Reply{Text: "wrote it"}
	}
	text := strings.Join(texts, "\n")
	if m := writeRequest().FindStringSubmatch(text); m != nil {
		for _, name := range writeTools {
			i := slices.IndexFunc(tools, func(t tool) bool { return t.name == name })
			if i < 0 {
				continue
			}
			pathArg := "file_path"
			for _, p := range []string{"file_path", "filePath", "path", "absolute_path"} {
				if slices.Contains(tools[i].params, p) {
					pathArg = p
					break
				}
			}
			return Reply{Tool: name, Args: map[string]any{pathArg: m[1], "content": m[2]}}
		}
		return Reply{Text: "stub: no tool to write with"}
	}
	return Reply{Text: "stub: " + usersWords(texts)}
}

// usersWords picks the user's words out of the texts of a user message:
// agents add context of their own around them, in blocks or lines of
// markup (<system-reminder>…) before or after.
func usersWords(texts []string) string {
	for i := len(texts) - 1; i >= 0; i-- {
		lines := strings.Split(markup().ReplaceAllString(texts[i], ""), "\n")
		for j := len(lines) - 1; j >= 0; j-- {
			l := strings.TrimSpace(lines[j])
			if l != "" && !strings.HasPrefix(l, "<") {
				return l
			}
		}
	}
	return ""
}

// schemaParams lists the property names of a JSON schema object.
func schemaParams(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	return out
}
