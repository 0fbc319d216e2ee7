package http

import (
	"context"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// fakeHooks is a HookService that answers from a fixed list and records
// the filter it was asked.
type fakeHooks struct {
	asked []berth.HookDeliveryFilter
	ds    []*berth.HookDelivery
}

func (f *fakeHooks) Hooks() []berth.HookInfo {
	return []berth.HookInfo{{Name: "chat", Events: []string{"turn_ended"}, Kind: "url", Target: "https://chat.example/…", Signed: true}}
}

func (f *fakeHooks) ListDeliveries(_ context.Context, fl berth.HookDeliveryFilter) (*berth.HookDeliveryPage, error) {
	f.asked = append(f.asked, fl)
	page := &berth.HookDeliveryPage{}
	for _, d := range f.ds {
		if fl.State == "" || d.State == fl.State {
			page.Deliveries = append(page.Deliveries, d)
		}
	}
	return page, nil
}

func TestHookRoutes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fh := &fakeHooks{ds: []*berth.HookDelivery{
		{ID: "dlv_1", Hook: "chat", Event: "turn_ended", SessionID: "ses_1", Seq: 7, State: berth.DeliveryDelivered,
			Attempts: 1, CreatedAt: now, DeliveredAt: &now, Body: []byte(`{"secret":"body"}`)},
		{ID: "dlv_2", Hook: "chat", Event: "turn_ended", SessionID: "ses_1", Seq: 9, State: berth.DeliveryFailed,
			Attempts: 30, LastError: "HTTP 500", CreatedAt: now},
	}}
	h := NewServer(newFakeService(), ServerOptions{Hooks: fh}).Handler()
	code, body, _ := call(t, h, "GET", "/v1/hooks/deliveries?state=failed&limit=5&cursor=42&session=ses_1", "")
	if code != 200 {
		t.Fatalf("status %d: %v", code, body)
	}
	ds := body["deliveries"].([]any)
	if len(ds) != 1 || ds[0].(map[string]any)["id"] != "dlv_2" || ds[0].(map[string]any)["last_error"] != "HTTP 500" {
		t.Fatalf("deliveries %v", ds)
	}
	if got := fh.asked[0]; got != (berth.HookDeliveryFilter{State: "failed", Limit: 5, Cursor: "42", SessionID: "ses_1"}) {
		t.Fatalf("filter %+v", got)
	}
	_, body, _ = call(t, h, "GET", "/v1/hooks/deliveries?state=delivered", "")
	d := body["deliveries"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "hook", "hook_index", "event", "session_id", "seq", "state", "attempts", "created_at", "delivered_at"} {
		if _, ok := d[k]; !ok {
			t.Errorf("delivery lacks %q: %v", k, d)
		}
	}
	if _, ok := d["body"]; ok {
		t.Errorf("delivery shows its body: %v", d)
	}
	code, body, _ = call(t, h, "GET", "/v1/hooks/deliveries?state=lost", "")
	if code != 400 || errCode(t, body) != berth.EInvalid {
		t.Fatalf("bad state: %d %v", code, body)
	}
	_, body, _ = call(t, h, "GET", "/v1/hooks", "")
	if hs := body["hooks"].([]any); len(hs) != 1 || hs[0].(map[string]any)["name"] != "chat" {
		t.Fatalf("hooks %v", body)
	}
	// Without hooks the lists are empty arrays.
	h = NewServer(newFakeService(), ServerOptions{}).Handler()
	for path, key := range map[string]string{"/v1/hooks": "hooks", "/v1/hooks/deliveries": "deliveries"} {
		_, body, _ := call(t, h, "GET", path, "")
		if arr, ok := body[key].([]any); !ok || len(arr) != 0 {
			t.Errorf("GET %s: %v", path, body)
		}
	}
}
