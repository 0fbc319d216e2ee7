package http

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// ListCheckpoints implements berth.SessionService.
func (f *fakeService) ListCheckpoints(_ context.Context, id string) ([]*berth.Checkpoint, error) {
	return inSession(f, "", id, func(*berth.Session) ([]*berth.Checkpoint, error) {
		return []*berth.Checkpoint{{ID: "ckpt_1", TurnID: "turn_1", CreatedAt: time.Unix(5, 0).UTC(), Files: 3, Bytes: 12,
			Skipped: []berth.CheckpointSkip{{Path: "big.bin", Reason: "too_large"}}, SkippedTotal: 1}}, nil
	})
}

// Rewind implements berth.SessionService.
func (f *fakeService) Rewind(_ context.Context, id string, req berth.RewindRequest) (*berth.Session, error) {
	return inSession(f, "", id, func(s *berth.Session) (*berth.Session, error) {
		if req.CheckpointID != "ckpt_1" {
			return nil, berth.Errorf(berth.ENotFound, "no checkpoint %s", req.CheckpointID)
		}
		return s, nil
	})
}

// Fork implements berth.SessionService.
func (f *fakeService) Fork(_ context.Context, id string, req berth.ForkRequest) (*berth.Session, error) {
	return inSession(f, "", id, func(c *berth.Session) (*berth.Session, error) {
		c.ID, c.Name, c.Agent = "ses_fork", req.Name, req.Agent
		c.ForkedFrom = &berth.ForkRef{SessionID: id, CheckpointID: req.CheckpointID}
		return c, nil
	})
}

func TestCheckpointRoutes(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	code, body, _ := call(t, h, "GET", "/v1/sessions/ses_1/checkpoints", "")
	list, _ := body["checkpoints"].([]any)
	if code != http.StatusOK || len(list) != 1 {
		t.Fatalf("list: %d %v", code, body)
	}
	c := list[0].(map[string]any)
	for _, k := range []string{"id", "turn_id", "created_at", "files", "bytes", "skipped"} {
		if _, ok := c[k]; !ok {
			t.Fatalf("checkpoint lacks %s: %v", k, c)
		}
	}
	if code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/rewind", `{"checkpoint_id":"ckpt_1"}`); code != http.StatusOK || body["id"] != "ses_1" {
		t.Fatalf("rewind: %d %v", code, body)
	}
	if code, _, _ = call(t, h, "POST", "/v1/sessions/ses_1/rewind", `{"checkpoint_id":"ckpt_2"}`); code != http.StatusNotFound {
		t.Fatalf("rewind unknown: %d", code)
	}
	if code, _, _ = call(t, h, "POST", "/v1/sessions/ses_1/rewind", `{"checkpoint":"ckpt_1"}`); code != http.StatusBadRequest {
		t.Fatalf("rewind unknown field: %d", code)
	}
	code, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/fork", `{"checkpoint_id":"ckpt_1","agent":"demo","name":"retry"}`)
	ff, _ := body["forked_from"].(map[string]any)
	if code != http.StatusCreated || body["name"] != "retry" || ff["session_id"] != "ses_1" || ff["checkpoint_id"] != "ckpt_1" {
		t.Fatalf("fork: %d %v", code, body)
	}
	if code, _, _ = call(t, h, "POST", "/v1/sessions/nope/fork", `{"checkpoint_id":"ckpt_1"}`); code != http.StatusNotFound {
		t.Fatalf("fork of unknown session: %d", code)
	}
}
