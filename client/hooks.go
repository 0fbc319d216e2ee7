package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-sh/berth"
)

// ListHooks returns the daemon's configured hooks (without their secrets,
// URL paths or command arguments).
func (c *Client) ListHooks(ctx context.Context) ([]berth.HookInfo, error) {
	var out hookList
	if err := c.Do(ctx, http.MethodGet, "/v1/hooks", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Hooks, nil
}

// ListHookDeliveries returns a page of hook deliveries, newest first; pass
// the page's next cursor as f.Cursor for the next one.
func (c *Client) ListHookDeliveries(ctx context.Context, f berth.HookDeliveryFilter) (*berth.HookDeliveryPage, error) {
	return call[berth.HookDeliveryPage](ctx, c, http.MethodGet, "/v1/hooks/deliveries", HookDeliveryQuery(f), nil)
}

// HookDeliveryQuery returns the query string of GET /v1/hooks/deliveries
// for f.
func HookDeliveryQuery(f berth.HookDeliveryFilter) url.Values {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.SessionID != "" {
		q.Set("session", f.SessionID)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	return q
}
