package http

import (
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// credentials answers /v1/credentials (docs/api.md, Credentials): the
// user's model keys, set and listed and removed, never shown.
type credentials struct {
	*edge
	// store is nil for a server given none: it lists nothing and sets
	// nothing.
	store berth.CredentialStore
}

// credentialList is the answer of GET /v1/credentials.
type credentialList struct {
	Credentials []berth.Credential `json:"credentials"`
}

// putCredential is the body of PUT /v1/credentials/{name}.
type putCredential struct {
	Value string `json:"value"`
	Kind  string `json:"kind,omitempty"`
}

// credentialBodyLimit caps the body of a put: the largest value, each
// byte escaped ("\u00xx"), and room for the kind.
const credentialBodyLimit = 6*berth.MaxCredentialBytes + 1024

// errNoCredentials answers for a server that keeps no credentials.
var errNoCredentials = berth.Errorf(berth.EUnavailable, "this daemon keeps no credentials")

// handleList answers GET /v1/credentials.
func (h *credentials) handleList(w http.ResponseWriter, r *http.Request) {
	var list []berth.Credential
	var err error
	if h.store != nil {
		list, err = h.store.ListCredentials(r.Context())
	}
	h.reply(w, r, http.StatusOK, credentialList{Credentials: orEmpty(list)}, err)
}

// handlePut answers PUT /v1/credentials/{name} with the credential,
// without its value.
func (h *credentials) handlePut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// The name is checked before the body is read, so a value is never
	// decoded for a request refused anyway.
	if err := berth.ValidateCredentialName(name); err != nil {
		h.writeError(w, r, err)
		return
	}
	var body putCredential
	if err := decodeStrict(w, r, &body, credentialBodyLimit); err != nil {
		h.writeError(w, r, err)
		return
	}
	if h.store == nil {
		h.writeError(w, r, errNoCredentials)
		return
	}
	if err := h.store.PutCredential(r.Context(), name, body.Kind, []byte(body.Value)); err != nil {
		h.writeError(w, r, err)
		return
	}
	list, err := h.store.ListCredentials(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	for _, c := range list {
		if c.Name == name {
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
	// Deleted between the put and the list.
	h.writeError(w, r, berth.CredentialNotSet(name))
}

// handleDelete answers DELETE /v1/credentials/{name} with 204.
func (h *credentials) handleDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := berth.ValidateCredentialName(name)
	switch {
	case err != nil:
	case h.store == nil:
		err = berth.CredentialNotSet(name)
	default:
		err = h.store.DeleteCredential(r.Context(), name)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// credentialsPrefix starts the paths of single credentials.
const credentialsPrefix = "/v1/credentials/"

// logPath is a request's path as logs show it: a credential path whose
// name is not a valid one is cut to its prefix, for what a user typed
// there by mistake may be the value itself.
func logPath(p string) string {
	if name, ok := strings.CutPrefix(p, credentialsPrefix); ok && berth.ValidateCredentialName(name) != nil {
		return credentialsPrefix + "…"
	}
	return p
}
