package postgres

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// openWithKey opens the database of dir again with another credentials key.
func openWithKey(t *testing.T, dir string, key []byte) *Store {
	t.Helper()
	s, err := Open(context.Background(), databaseFor(t, dir), Options{Logger: quiet, CredentialKey: key})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// exec runs statements on the database of dir.
func exec(t *testing.T, dir string, sql ...string) {
	t.Helper()
	for _, q := range sql {
		pgtest.Exec(t, databaseFor(t, dir), q)
	}
}

// No table holds a credential's value as plaintext, in hex or in base64;
// the same value put twice is sealed under two nonces.
func TestCredentialsEncryptedAtRest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWithKey(t, dir, testKey)
	value := []byte("sk-ant-api03-" + strings.Repeat("Zq", 24))
	for _, name := range []string{"one", "two"} {
		if err := s.PutCredential(ctx, name, "", value); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.CredentialValue(ctx, "one"); err != nil || !bytes.Equal(v, value) {
		t.Fatalf("value: %q, %v", v, err)
	}
	c, err := pgx.Connect(ctx, databaseFor(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tables := pgtest.TableRows(t, ctx, c)
	if len(tables) < 5 {
		t.Fatalf("%d tables", len(tables))
	}
	forms := []string{string(value), hex.EncodeToString(value), base64.StdEncoding.EncodeToString(value)}
	for table, texts := range tables {
		for _, text := range texts {
			for _, f := range forms {
				if strings.Contains(strings.ToLower(text), strings.ToLower(f)) {
					t.Errorf("table %s holds the value: %s", table, text)
				}
			}
		}
	}
	var distinct int
	if err := c.QueryRow(ctx, `SELECT count(DISTINCT nonce) FROM credentials`).Scan(&distinct); err != nil || distinct != 2 {
		t.Fatalf("distinct nonces: %d, %v", distinct, err)
	}
}

// Without a key a node refuses to set or read a credential, saying how to
// set key_file, and still lists and deletes them; a node with another
// key refuses to read one, naming the key file.
func TestCredentialsKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWithKey(t, dir, testKey)
	if err := s.PutCredential(ctx, "openai", "", []byte("sk-1")); err != nil {
		t.Fatal(err)
	}

	none := openWithKey(t, dir, nil)
	err := none.PutCredential(ctx, "other", "", []byte("sk-2"))
	if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), "[credentials] key_file") {
		t.Fatalf("put without a key: %v", err)
	}
	if _, err := none.CredentialValue(ctx, "openai"); berth.ErrorCode(err) != berth.EUnavailable {
		t.Fatalf("read without a key: %v", err)
	}
	if list, err := none.ListCredentials(ctx); err != nil || len(list) != 1 {
		t.Fatalf("list without a key: %v, %v", list, err)
	}

	other := openWithKey(t, dir, bytes.Repeat([]byte{7}, CredentialKeySize))
	_, err = other.CredentialValue(ctx, "openai")
	if berth.ErrorCode(err) != berth.EUnavailable || !strings.Contains(berth.ErrorMessage(err), "another key") {
		t.Fatalf("read under another key: %v", err)
	}
	if err := none.DeleteCredential(ctx, "openai"); err != nil {
		t.Fatalf("delete without a key: %v", err)
	}

	if _, err := Open(ctx, databaseFor(t, dir), Options{Logger: quiet, CredentialKey: []byte("short")}); berth.ErrorCode(err) != berth.EInvalid {
		t.Fatalf("a 5-byte key: %v", err)
	}
}

// A sealed value copied into another credential's row does not open
// there: the name is sealed with it.
func TestCredentialsRowsCannotBeSwapped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWithKey(t, dir, testKey)
	for name, v := range map[string]string{"cheap": "sk-cheap", "dear": "sk-dear"} {
		if err := s.PutCredential(ctx, name, berth.CredentialAPIKey, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, dir, `UPDATE credentials c SET nonce = d.nonce, sealed = d.sealed
		FROM credentials d WHERE c.name = 'cheap' AND d.name = 'dear'`)
	v, err := s.CredentialValue(ctx, "cheap")
	if berth.ErrorCode(err) != berth.EUnavailable || v != nil {
		t.Fatalf("swapped row read %q, %v; want unavailable", v, err)
	}
	if v, err := s.CredentialValue(ctx, "dear"); err != nil || string(v) != "sk-dear" {
		t.Fatalf("the other row: %q, %v", v, err)
	}
}
