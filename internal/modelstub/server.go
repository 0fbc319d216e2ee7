package modelstub

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Server serves the APIs on one listener: /v1/messages (Anthropic),
// /v1/chat/completions or /chat/completions (OpenAI-compatible),
// /v1/responses (OpenAI Responses) and /VERSION/models/MODEL:generateContent
// or :streamGenerateContent (Gemini). Any other path is a 404. It keeps the
// replies it gave, for a test to look at.
type Server struct {
	ids atomic.Int64

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

// nextID returns a fresh id with prefix.
func (s *Server) nextID(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, s.ids.Add(1))
}

// Serve serves on l until it is closed.
func (s *Server) Serve(l net.Listener) error {
	return (&http.Server{Handler: s}).Serve(l)
}
