package http

import (
	"context"
	"testing"

	"github.com/berth-sh/berth"
)

// spawnCall is what the fake's SpawnChild was asked.
type spawnCall struct {
	parent, key string
	req         berth.CreateRequest
}

// SpawnChild implements berth.SessionService: the child is one more session
// of the fake, below its parent.
func (f *fakeService) SpawnChild(_ context.Context, parentID string, req berth.CreateRequest, idemKey string) (*berth.Session, error) {
	return inSession(f, "SpawnChild", parentID, func(p *berth.Session) (*berth.Session, error) {
		f.spawns = append(f.spawns, spawnCall{parentID, idemKey, req})
		c := &berth.Session{ID: "ses_kid", Agent: req.Agent, State: berth.StateActive, Badge: berth.BadgeIdle, Labels: map[string]string{},
			ParentID: p.ID, RootID: p.ID, Depth: p.Depth + 1}
		f.sessions[c.ID] = c
		cp := *c
		return &cp, nil
	})
}

// TestSpawnChildEdge: POST …/children needs ttl_seconds (400 before the
// service is asked), refuses unknown fields, hands the body and the
// Idempotency-Key to the service and answers 201 with the child and its
// Location; the lineage fields are in the Session JSON.
func TestSpawnChildEdge(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	for _, body := range []string{`{"agent":"demo"}`, `{"agent":"demo","ttl_seconds":0}`, `{"agent":"demo","ttl_seconds":-5}`,
		`{"agent":"demo","ttl_seconds":60,"bogus":1}`, `{"agent":"demo","ttl_seconds":999999999999}`} {
		status, ans, _ := call(t, h, "POST", "/v1/sessions/ses_1/children", body)
		if status != 400 || errCode(t, ans) != berth.EInvalid {
			t.Errorf("spawn %s = %d %v, want 400", body, status, ans)
		}
	}
	if n := len(f.spawns); n != 0 {
		t.Fatalf("the service was asked %d times for refused bodies", n)
	}
	status, ans, hdr := call(t, h, "POST", "/v1/sessions/ses_1/children",
		`{"agent":"demo","name":"kid","ttl_seconds":60,"permission_mode":"ask"}`, "Idempotency-Key", "k-1")
	if status != 201 || ans["id"] != "ses_kid" || hdr.Get("Location") != "/v1/sessions/ses_kid" {
		t.Fatalf("spawn = %d %v (Location %q)", status, ans, hdr.Get("Location"))
	}
	if ans["parent_id"] != "ses_1" || ans["root_id"] != "ses_1" || ans["depth"] != 1.0 {
		t.Errorf("lineage in the answer: %v", ans)
	}
	got := f.spawns[0]
	if got.parent != "ses_1" || got.key != "k-1" || got.req.TTLSeconds != 60 || got.req.Name != "kid" || got.req.PermissionMode != "ask" {
		t.Errorf("the service was asked %+v", got)
	}
	if status, ans, _ := call(t, h, "POST", "/v1/sessions/ses_nope/children", `{"agent":"demo","ttl_seconds":60}`); status != 404 {
		t.Errorf("spawn under an unknown parent = %d %v", status, ans)
	}
}

// TestListChildrenEdge: GET …/children lists by parent (404 for an unknown
// session) and ?root= reaches the service's filter.
func TestListChildrenEdge(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	status, ans, _ := call(t, h, "GET", "/v1/sessions/ses_1/children", "")
	if status != 200 || f.lastSessionF.Parent != "ses_1" {
		t.Fatalf("children = %d %v, filter %+v", status, ans, f.lastSessionF)
	}
	if _, ok := ans["sessions"].([]any); !ok {
		t.Errorf("children answer has no sessions array: %v", ans)
	}
	if status, _, _ := call(t, h, "GET", "/v1/sessions/ses_nope/children", ""); status != 404 {
		t.Errorf("children of an unknown session = %d", status)
	}
	if status, _, _ := call(t, h, "GET", "/v1/sessions?root=ses_1", ""); status != 200 || f.lastSessionF.Root != "ses_1" {
		t.Errorf("?root= = %d, filter %+v", status, f.lastSessionF)
	}
}
