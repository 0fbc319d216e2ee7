package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/berth-sh/berth"
)

// Exec runs a command in the session's sandbox and returns its result.
func (c *Client) Exec(ctx context.Context, id string, req berth.ExecRequest) (*berth.ExecResult, error) {
	return call[berth.ExecResult](ctx, c, http.MethodPost, sessionPath(id, "/exec"), nil, req)
}

// CreateSnapshot archives the session's workspace.
func (c *Client) CreateSnapshot(ctx context.Context, id string) (*berth.Snapshot, error) {
	return call[berth.Snapshot](ctx, c, http.MethodPost, sessionPath(id, "/snapshots"), nil, nil)
}

// ListSnapshots returns the session's snapshots, newest first.
func (c *Client) ListSnapshots(ctx context.Context, id string) ([]*berth.Snapshot, error) {
	var out snapshotList
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/snapshots"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// Repair checks a stopped session's log and, unless dryRun, appends what
// closes it properly; a session stopped by its user needs force.
func (c *Client) Repair(ctx context.Context, id string, dryRun, force bool) (*berth.RepairReport, error) {
	q := url.Values{}
	if dryRun {
		q.Set("dry_run", "true")
	}
	if force {
		q.Set("force", "true")
	}
	return call[berth.RepairReport](ctx, c, http.MethodPost, sessionPath(id, "/repair"), q, nil)
}

// WaitTurn blocks until a turn ends and returns its result: turnID is a
// turn's id, or the entry id of a queued or staged prompt (whose turn is
// waited for once it runs). It is GET /v1/sessions/{id}/turns/{turn}, a
// long poll that ends with ctx.
func (c *Client) WaitTurn(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	return call[berth.TurnResult](ctx, c, http.MethodGet, sessionPath(id, "/turns/"+url.PathEscape(turnID)), nil, nil)
}

// CallTool calls tool on a session's tools socket (a client of that socket
// with the session's credential as its token, see WithToken), decoding its
// answer into out.
func (c *Client) CallTool(ctx context.Context, tool string, in, out any) error {
	return c.Do(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(tool), nil, in, out)
}

// OpenAPI returns the daemon's OpenAPI 3.1 description of its API, as the
// daemon serves it.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	var doc json.RawMessage
	if err := c.Do(ctx, http.MethodGet, "/v1/openapi.json", nil, nil, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}
