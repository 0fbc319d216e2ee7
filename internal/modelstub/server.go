package modelstub

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves the APIs on one listener: /v1/messages (Anthropic),
// /v1/chat/completions or /chat/completions (OpenAI-compatible),
// /v1/responses (OpenAI Responses) and /VERSION/models/MODEL:generateContent
// or :streamGenerateContent (Gemini). Any other path is a 404. It keeps the
// replies it gave, for a test to look at.
type Server struct {
	ids atomic.Int64
	// stamp sets this server's ids apart from another's: an agent
	// restarted (a resumed session) talks to a new stub, and a tool call
	// id its history holds already would be taken for that old call.
	stamp     sync.Once
	stampText string

	mu      sync.Mutex
	replies []string
}

// ServeHTTP routes a request to the API its path names.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, ":generateContent") ||
		strings.HasSuffix(r.URL.Path, ":streamGenerateContent")):
		s.serveGemini(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		s.serveAnthropic(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.serveOpenAI(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		s.serveResponses(w, r)
	default:
		http.NotFound(w, r)
	}
}

// Replies lists the replies given so far, as "api: text" or "api: tool".
func (s *Server) Replies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.replies...)
}

// record notes a reply given.
func (s *Server) record(api string, r Reply) {
	what := r.Text
	if r.Tool != "" {
		what = "call " + r.Tool
	}
	s.mu.Lock()
	s.replies = append(s.replies, api+": "+what)
	s.mu.Unlock()
}

// nextID returns a fresh id with prefix, unique among servers too.
func (s *Server) nextID(prefix string) string {
	s.stamp.Do(func() { s.stampText = strconv.FormatInt(time.Now().UnixNano(), 36) })
	return fmt.Sprintf("%s%s_%d", prefix, s.stampText, s.ids.Add(1))
}

// Serve serves on l until it is closed.
func (s *Server) Serve(l net.Listener) error {
	return (&http.Server{Handler: s}).Serve(l)
}

// decodeRequest reads the JSON body of r into req; a body that is not
// JSON is answered 400 with the API's own error body, and false.
func decodeRequest(w http.ResponseWriter, r *http.Request, req any, errBody string) bool {
	if err := json.NewDecoder(r.Body).Decode(req); err != nil {
		http.Error(w, errBody, http.StatusBadRequest)
		return false
	}
	return true
}

// message is one message of a chat request: its role and its content, a
// string or an array of content blocks.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is one content block of a message.
type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocks is a message's content as blocks: a string is one text block.
func (m message) blocks() []block {
	var str string
	if json.Unmarshal(m.Content, &str) == nil {
		return []block{{Type: "text", Text: str}}
	}
	var blocks []block
	_ = json.Unmarshal(m.Content, &blocks)
	return blocks
}
