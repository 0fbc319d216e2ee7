package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/berth-sh/berth"
)

// SpawnChild creates a child of the session parentID (req.TTLSeconds is
// required); a non-empty idemKey is sent as the Idempotency-Key header, so
// a retry with the same key answers the same child.
func (c *Client) SpawnChild(ctx context.Context, parentID string, req berth.CreateRequest, idemKey string) (*berth.Session, error) {
	raw, err := c.SpawnChildRaw(ctx, parentID, req, idemKey)
	if err != nil {
		return nil, err
	}
	var s berth.Session
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "the daemon's answer to a spawn is not valid JSON")
	}
	return &s, nil
}

// SpawnChildRaw is SpawnChild answering the Session JSON as the daemon
// sent it.
func (c *Client) SpawnChildRaw(ctx context.Context, parentID string, req berth.CreateRequest, idemKey string) (json.RawMessage, error) {
	var h http.Header
	if idemKey != "" {
		h = http.Header{"Idempotency-Key": {idemKey}}
	}
	resp, err := c.send(ctx, http.MethodPost, sessionPath(parentID, "/children"), nil, req, h)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, berth.WrapError(berth.EInternal, err, "the daemon's answer to a spawn is not valid JSON")
	}
	return raw, nil
}

// ListChildren returns every child of a session, newest first.
func (c *Client) ListChildren(ctx context.Context, id string) ([]*berth.Session, error) {
	var page berth.SessionPage
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/children"), nil, nil, &page); err != nil {
		return nil, err
	}
	return page.Sessions, nil
}
