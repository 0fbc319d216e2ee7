package postgres

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// CredentialKeySize is the size of the key that seals credentials
// ([credentials] key_file): AES-256.
const CredentialKeySize = 32

// errNoCredentialKey is what a credential call gets from a store opened
// without a key.
var errNoCredentialKey = berth.Errorf(berth.EUnavailable,
	"this PostgreSQL store keeps credentials only encrypted, and this node has no key: set [credentials] key_file "+
		"to a 0600 file of 32 random bytes (berth credentials keygen PATH, or head -c 32 /dev/urandom > PATH), "+
		"the same file on every node")

// sealer encrypts and decrypts credential values with a store's key.
type sealer struct {
	aead cipher.AEAD
	// id names the key in the rows it sealed (migration 0025).
	id string
}

// newSealer returns the sealer of key; nil for no key. EInvalid for a key
// that is not CredentialKeySize bytes.
func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		return nil, nil
	}
	if len(key) != CredentialKeySize {
		return nil, berth.Errorf(berth.EInvalid, "the credentials key is %d bytes; want %d", len(key), CredentialKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "the credentials key")
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "the credentials cipher")
	}
	sum := sha256.Sum256(key)
	return &sealer{aead: aead, id: hex.EncodeToString(sum[:8])}, nil
}

// additional is the data a value is sealed with besides itself: its row's
// name and kind, so that a sealed value moved to another row (or kind)
// does not open.
func additional(name, kind string) []byte {
	return []byte("berth-credential-v1\x00" + name + "\x00" + kind)
}

// seal encrypts value under a fresh random nonce.
func (k *sealer) seal(name, kind string, value []byte) (nonce, sealed []byte, err error) {
	nonce = make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, internal(err, "credential nonce")
	}
	return nonce, k.aead.Seal(nil, nonce, value, additional(name, kind)), nil
}

// open decrypts a row's value. EUnavailable when it was sealed under
// another key or does not open.
func (k *sealer) open(name, kind, keyID string, nonce, sealed []byte) ([]byte, error) {
	if keyID != k.id {
		return nil, &berth.Error{Code: berth.EUnavailable, Details: map[string]any{"credential": name},
			Message: "credential \"" + name + "\" was encrypted under another key than this node's [credentials] key_file: " +
				"every node needs the same key file; or set the credential again"}
	}
	if len(nonce) != k.aead.NonceSize() {
		return nil, undecryptable(name, nil)
	}
	value, err := k.aead.Open(nil, nonce, sealed, additional(name, kind))
	if err != nil {
		return nil, undecryptable(name, err)
	}
	return value, nil
}

// undecryptable is the error of a row that does not open under its key.
func undecryptable(name string, err error) error {
	return &berth.Error{Code: berth.EUnavailable, Details: map[string]any{"credential": name}, Err: err,
		Message: "credential \"" + name + "\" does not decrypt (its row was altered or moved): set it again"}
}

// putCredentialSQL inserts or replaces a credential; a replaced one has
// not been used yet.
const putCredentialSQL = `INSERT INTO credentials (name, kind, key_id, nonce, sealed, created_at, last_used_at)
VALUES ($1, $2, $3, $4, $5, $6, NULL)
ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, key_id = excluded.key_id, nonce = excluded.nonce,
    sealed = excluded.sealed, created_at = excluded.created_at, last_used_at = NULL`

// PutCredential implements berth.CredentialStore: the value is sealed
// with AES-256-GCM under the node's key. EUnavailable without a key.
func (s *Store) PutCredential(ctx context.Context, name, kind string, value []byte) error {
	kind, err := berth.CheckCredential(name, kind, value)
	if err != nil {
		return err
	}
	if s.sealer == nil {
		return errNoCredentialKey
	}
	nonce, sealed, err := s.sealer.seal(name, kind, value)
	if err != nil {
		return err
	}
	now, _ := codec.ToNanos(time.Now())
	err = s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, putCredentialSQL, name, kind, s.sealer.id, nonce, sealed, now)
		return err
	})
	if err != nil {
		return internal(err, "put credential")
	}
	return nil
}

// CredentialValue implements berth.CredentialStore. The use is recorded
// by a second statement, only when the recorded one is older than
// berth.CredentialTouchInterval; a failure to record it does not fail the
// read.
func (s *Store) CredentialValue(ctx context.Context, name string) ([]byte, error) {
	if err := berth.ValidateCredentialName(name); err != nil {
		return nil, err
	}
	if s.sealer == nil {
		return nil, errNoCredentialKey
	}
	var kind, keyID string
	var nonce, sealed []byte
	var used *int64
	err := s.queryRow(ctx, `SELECT kind, key_id, nonce, sealed, last_used_at FROM credentials WHERE name = $1`,
		[]any{name}, &kind, &keyID, &nonce, &sealed, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, berth.CredentialNotSet(name)
	}
	if err != nil {
		return nil, internal(err, "read credential")
	}
	value, err := s.sealer.open(name, kind, keyID, nonce, sealed)
	if err != nil {
		return nil, err
	}
	now, _ := codec.ToNanos(time.Now())
	if used == nil || now-*used >= int64(berth.CredentialTouchInterval) {
		_ = s.pool.with(ctx, func(c *pgx.Conn) error {
			_, err := c.Exec(ctx, `UPDATE credentials SET last_used_at = $2
				WHERE name = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, name, now)
			return err
		})
	}
	return value, nil
}

// ListCredentials implements berth.CredentialStore. It needs no key: it
// reads no value.
func (s *Store) ListCredentials(ctx context.Context) ([]berth.Credential, error) {
	out := []berth.Credential{}
	err := s.query(ctx, `SELECT name, kind, created_at, last_used_at FROM credentials ORDER BY name`, nil,
		func(rows pgx.Rows) error {
			var c berth.Credential
			var created int64
			var used *int64
			if err := rows.Scan(&c.Name, &c.Kind, &created, &used); err != nil {
				return err
			}
			c.CreatedAt = codec.FromNanos(created)
			if used != nil {
				at := codec.FromNanos(*used)
				c.LastUsedAt = &at
			}
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, internal(err, "list credentials")
	}
	return out, nil
}

// DeleteCredential implements berth.CredentialStore. It needs no key.
func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	if err := berth.ValidateCredentialName(name); err != nil {
		return err
	}
	var n int64
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM credentials WHERE name = $1`, name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return internal(err, "delete credential")
	}
	if n == 0 {
		return berth.CredentialNotSet(name)
	}
	return nil
}
