package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-sh/berth"
)

// credentialList is the answer of GET /v1/credentials.
type credentialList struct {
	Credentials []berth.Credential `json:"credentials"`
}

// credentialPut is the body of PUT /v1/credentials/{name}.
type credentialPut struct {
	Value string `json:"value"`
	Kind  string `json:"kind,omitempty"`
}

// credentialPath is the API path of a credential.
func credentialPath(name string) string { return "/v1/credentials/" + url.PathEscape(name) }

// SetCredential sets the value of the credential name (docs/api.md,
// Credentials); kind "" lets the daemon tell it from the value. The answer
// never holds the value.
func (c *Client) SetCredential(ctx context.Context, name, kind string, value []byte) (*berth.Credential, error) {
	return call[berth.Credential](ctx, c, http.MethodPut, credentialPath(name), nil, credentialPut{Value: string(value), Kind: kind})
}

// ListCredentials returns the daemon's credentials, by name, without values.
func (c *Client) ListCredentials(ctx context.Context) ([]berth.Credential, error) {
	var out credentialList
	if err := c.Do(ctx, http.MethodGet, "/v1/credentials", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Credentials, nil
}

// DeleteCredential removes a credential. ENotFound when it is not set.
func (c *Client) DeleteCredential(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, credentialPath(name), nil, nil, nil)
}
