package berth

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// Credential is a stored credential as the API shows it (docs/api.md,
// Credentials): its name, kind and times. It has no value field on
// purpose: a value leaves the store only through
// CredentialStore.CredentialValue, for the model gateway.
type Credential struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Credential kinds.
const (
	// CredentialAPIKey is a provider's API key (the default).
	CredentialAPIKey = "api_key"
	// CredentialOAuthToken is a subscription token, such as Claude Code's
	// sk-ant-oat….
	CredentialOAuthToken = "oauth_token"
)

// oauthTokenPrefix starts Claude Code's subscription (OAuth) tokens: a value
// set without a kind that starts with it is a CredentialOAuthToken.
const oauthTokenPrefix = "sk-ant-oat"

// MaxCredentialBytes bounds a credential's value: far above any provider's
// key or token, small enough to go in an HTTP header.
const MaxCredentialBytes = 16 << 10

// CredentialTouchInterval is how stale a credential's last_used_at may be:
// a store records a use at most once per interval, so that reading a value
// on every model call does not write every time.
const CredentialTouchInterval = time.Minute

// validCredentialName reports whether name is what a credential's name may
// be — ^[a-z0-9][a-z0-9_-]{0,62}$ — for it appears in config ([[models]]
// credential), URLs and messages. A loop, not a regexp: the regexp's
// compiled program (some 50 KiB) was built at start in every berth
// process, shims and agents included.
func validCredentialName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CredentialStore keeps the user's credentials (docs/api.md, Credentials).
// Every Store implements it; where the values live is the backend's
// business (never beside the sessions in a form anything else can read).
type CredentialStore interface {
	// PutCredential sets the value of the credential name, creating it or
	// replacing its value and kind (created_at is then the time of this
	// put, last_used_at cleared). kind "" is CredentialOAuthToken for a
	// value that looks like one, else CredentialAPIKey. EInvalid for a bad
	// name, kind or value (CheckCredential); EUnavailable when the store
	// cannot keep credentials as configured (the message says how to fix
	// it).
	PutCredential(ctx context.Context, name, kind string, value []byte) error
	// CredentialValue returns the value of a credential and records its
	// use (at most once per CredentialTouchInterval). ENotFound
	// (CredentialNotSet) when it is not set, EInvalid for a bad name,
	// EUnavailable when it cannot be read as configured.
	CredentialValue(ctx context.Context, name string) ([]byte, error)
	// ListCredentials returns every credential, by name, without values.
	ListCredentials(ctx context.Context) ([]Credential, error)
	// DeleteCredential removes a credential. ENotFound when it is not set,
	// EInvalid for a bad name.
	DeleteCredential(ctx context.Context, name string) error
}

// ValidateCredentialName checks a credential's name: 1 to 63 characters,
// lower-case letters, digits, '_' and '-', starting with a letter or digit.
func ValidateCredentialName(name string) error {
	if !validCredentialName(name) {
		return &Error{Code: EInvalid, Details: map[string]any{"field": "name"},
			// The name is not quoted: a value pasted in its place must not
			// reach a log.
			Message: "credential name is not valid: want 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	return nil
}

// CheckCredential checks a credential to be put and returns its kind (kind,
// or the one the value shows when kind is ""). The value must be 1 to
// MaxCredentialBytes bytes without control characters (it goes into an
// HTTP header); no message quotes it.
func CheckCredential(name, kind string, value []byte) (string, error) {
	if err := ValidateCredentialName(name); err != nil {
		return "", err
	}
	switch kind {
	case CredentialAPIKey, CredentialOAuthToken:
	case "":
		kind = CredentialAPIKey
		if bytes.HasPrefix(value, []byte(oauthTokenPrefix)) {
			kind = CredentialOAuthToken
		}
	default:
		return "", &Error{Code: EInvalid, Details: map[string]any{"field": "kind"},
			Message: fmt.Sprintf("credential kind is not valid: want %s or %s", CredentialAPIKey, CredentialOAuthToken)}
	}
	switch {
	case len(value) == 0:
		return "", &Error{Code: EInvalid, Details: map[string]any{"field": "value"}, Message: "credential value is empty"}
	case len(value) > MaxCredentialBytes:
		return "", &Error{Code: EInvalid, Details: map[string]any{"field": "value"},
			Message: fmt.Sprintf("credential value is %d bytes, more than the %d allowed", len(value), MaxCredentialBytes)}
	case bytes.IndexFunc(value, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "", &Error{Code: EInvalid, Details: map[string]any{"field": "value"},
			Message: "credential value holds a control character (a newline, NUL, …): it must fit in an HTTP header"}
	}
	return kind, nil
}

// CredentialNotSet is the ENotFound of a credential that is not set; its
// message says how to set it.
func CredentialNotSet(name string) error {
	return &Error{Code: ENotFound, Details: map[string]any{"credential": name},
		Message: fmt.Sprintf("credential %q is not set (berth credentials set %s)", name, name)}
}
