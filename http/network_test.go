package http

import (
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// The create body's network takes true, false or an allow list; an entry
// that does not parse is refused at the edge naming it; the service is
// given the normalized policy.
func TestCreateNetworkPolicy(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	for _, c := range []struct{ body, field string }{
		{`{"agent":"demo","network":{"allow":["ok.example","bad host"]}}`, "network.allow[1]"},
		{`{"agent":"demo","network":{"allow":["ok.example"],"deny":[]}}`, "network.deny"},
		{`{"agent":"demo","network":"yes"}`, "network"},
	} {
		status, ans, _ := call(t, h, "POST", "/v1/sessions", c.body)
		if status != 400 || errCode(t, ans) != berth.EInvalid || ans["error"].(map[string]any)["details"].(map[string]any)["field"] != c.field {
			t.Errorf("%s = %d %v, want 400 naming %s", c.body, status, ans, c.field)
		}
	}
	if f.lastCreate.Agent != "" {
		t.Fatal("the service was asked for a refused body")
	}
	for _, c := range []struct {
		body string
		want berth.NetworkPolicy
	}{
		{`{"agent":"demo","network":true}`, berth.NetworkOf(true)},
		{`{"agent":"demo","network":false}`, berth.NetworkOf(false)},
		{`{"agent":"demo","network":{"allow":["API.github.com","api.github.com"],"ask":true}}`,
			berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: []string{"api.github.com"}, Ask: true}},
	} {
		if status, ans, _ := call(t, h, "POST", "/v1/sessions", c.body); status != 201 {
			t.Fatalf("%s = %d %v", c.body, status, ans)
		}
		got := f.lastCreate.Network
		if got.Mode != c.want.Mode || got.Ask != c.want.Ask || !slices.Equal(got.Allow, c.want.Allow) {
			t.Errorf("%s: the service was given %+v, want %+v", c.body, got, c.want)
		}
	}
}
