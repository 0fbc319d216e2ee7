package memory

import (
	"context"

	"github.com/berth-sh/berth"
)

// PutCredential implements berth.CredentialStore: the value is kept in
// the daemon's memory only, like everything of this store.
func (s *Store) PutCredential(ctx context.Context, name, kind string, value []byte) error {
	return s.creds.PutCredential(ctx, name, kind, value)
}

// CredentialValue implements berth.CredentialStore.
func (s *Store) CredentialValue(ctx context.Context, name string) ([]byte, error) {
	return s.creds.CredentialValue(ctx, name)
}

// ListCredentials implements berth.CredentialStore.
func (s *Store) ListCredentials(ctx context.Context) ([]berth.Credential, error) {
	return s.creds.ListCredentials(ctx)
}

// DeleteCredential implements berth.CredentialStore.
func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	return s.creds.DeleteCredential(ctx, name)
}
