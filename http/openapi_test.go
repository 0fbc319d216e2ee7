package http

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/apitest"
)

// The OpenAPI document describes every route of the API and no route the
// server does not have (method and path), and it is served as JSON.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := apitest.Document()
	var described []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+path)
		}
	}
	served := NewServer(newFakeService(), ServerOptions{}).APIRoutes()
	slices.Sort(described)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not in http/openapi.json", r)
		}
	}
	for _, r := range described {
		if !slices.Contains(served, r) {
			t.Errorf("http/openapi.json describes %s, which the server does not have", r)
		}
	}

	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	code, body, hdr := call(t, h, "GET", "/v1/openapi.json", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !strings.HasPrefix(body["openapi"].(string), "3.1") {
		t.Fatalf("GET /v1/openapi.json: %d %s %v", code, hdr.Get("Content-Type"), body["openapi"])
	}
	if b, _ := json.Marshal(body); len(b) < 1000 {
		t.Errorf("the served document is %d bytes", len(b))
	}
}
