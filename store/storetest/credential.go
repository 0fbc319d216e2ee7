package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// testCredentials puts, reads, lists, replaces and deletes credentials:
// the list never carries a value, a kind is found from the value when
// not given, and a read records its use.
func testCredentials(t *testing.T, open Opener) {
	s := fresh(t, open)
	before := time.Now().UTC().Add(-time.Second)
	if list, err := s.ListCredentials(ctx(t)); err != nil || len(list) != 0 {
		t.Fatalf("empty store lists %v, %v", list, err)
	}
	if err := s.PutCredential(ctx(t), "anthropic", "", []byte("sk-ant-oat01-abc")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCredential(ctx(t), "openai", "", []byte("sk-proj-xyz")); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListCredentials(ctx(t))
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for i, want := range []struct{ name, kind string }{{"anthropic", berth.CredentialOAuthToken}, {"openai", berth.CredentialAPIKey}} {
		c := list[i]
		if c.Name != want.name || c.Kind != want.kind || c.LastUsedAt != nil ||
			c.CreatedAt.Before(before) || c.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("list[%d] = %+v, want %s of kind %s, created now, never used", i, c, want.name, want.kind)
		}
	}
	v, err := s.CredentialValue(ctx(t), "openai")
	if err != nil || string(v) != "sk-proj-xyz" {
		t.Fatalf("value: %q, %v", v, err)
	}
	// The caller's copy is its own.
	v[0] = 'X'
	if v, _ := s.CredentialValue(ctx(t), "openai"); string(v) != "sk-proj-xyz" {
		t.Fatalf("the store's value changed with the caller's copy: %q", v)
	}
	list, _ = s.ListCredentials(ctx(t))
	if used := list[1].LastUsedAt; used == nil || used.Before(before) {
		t.Fatalf("a read recorded no use: %+v", list[1])
	}
	// A put replaces the value and the kind, and the use is forgotten.
	if err := s.PutCredential(ctx(t), "openai", berth.CredentialOAuthToken, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.CredentialValue(ctx(t), "openai"); err != nil || string(v) != "second" {
		t.Fatalf("replaced value: %q, %v", v, err)
	}
	list, _ = s.ListCredentials(ctx(t))
	if list[1].Kind != berth.CredentialOAuthToken {
		t.Fatalf("replaced kind: %+v", list[1])
	}
	if err := s.DeleteCredential(ctx(t), "openai"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteCredential(ctx(t), "openai"), berth.ENotFound)
	_, err = s.CredentialValue(ctx(t), "openai")
	wantCode(t, err, berth.ENotFound)
	if list, _ := s.ListCredentials(ctx(t)); len(list) != 1 || list[0].Name != "anthropic" {
		t.Fatalf("after delete: %+v", list)
	}
}

// testCredentialsInvalid refuses bad names, kinds and values with
// EInvalid naming the field, never quoting the value, storing nothing.
func testCredentialsInvalid(t *testing.T, open Opener) {
	s := fresh(t, open)
	const secret = "s3cr3t-never-echoed"
	cases := []struct {
		name, kind, value, field string
	}{
		{"", "", secret, "name"},
		{"Upper", "", secret, "name"},
		{"-lead", "", secret, "name"},
		{"a/b", "", secret, "name"},
		{strings.Repeat("a", 64), "", secret, "name"},
		{"sk-ant-api03-" + secret + "XYZ", "", secret, "name"},
		{"ok", "password", secret, "kind"},
		{"ok", "", "", "value"},
		{"ok", "", secret + "\n", "value"},
		{"ok", "", secret + "\r", "value"},
		{"ok", "", "a\x00" + secret, "value"},
		{"ok", "", strings.Repeat("k", berth.MaxCredentialBytes+1), "value"},
	}
	for _, c := range cases {
		err := s.PutCredential(ctx(t), c.name, c.kind, []byte(c.value))
		wantCode(t, err, berth.EInvalid)
		if f := berth.ErrorDetails(err)["field"]; f != c.field {
			t.Errorf("put %q/%q: field %v, want %s", c.name, c.kind, f, c.field)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
	if list, err := s.ListCredentials(ctx(t)); err != nil || len(list) != 0 {
		t.Fatalf("refused puts stored %+v, %v", list, err)
	}
	_, err := s.CredentialValue(ctx(t), "Bad/Name")
	wantCode(t, err, berth.EInvalid)
	wantCode(t, s.DeleteCredential(ctx(t), "Bad/Name"), berth.EInvalid)
	// The largest value fits, every byte kept.
	big := bytes.Repeat([]byte("0123456789abcdef"), berth.MaxCredentialBytes/16)
	big[7] = 0xff
	if err := s.PutCredential(ctx(t), "big", "", big); err != nil {
		t.Fatal(err)
	}
	if v, err := s.CredentialValue(ctx(t), "big"); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("the largest value came back %d bytes, %v", len(v), err)
	}
}

// testCredentialsReopen finds credentials, and their last use, again in a
// reopened store.
func testCredentialsReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.PutCredential(ctx(t), "gemini", "", []byte("AIza-value")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialValue(ctx(t), "gemini"); err != nil {
		t.Fatal(err)
	}
	want, _ := s.ListCredentials(ctx(t))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got, err := s.ListCredentials(ctx(t))
	if err != nil || len(got) != 1 || got[0].LastUsedAt == nil || !got[0].LastUsedAt.Equal(*want[0].LastUsedAt) ||
		!got[0].CreatedAt.Equal(want[0].CreatedAt) {
		t.Fatalf("reopened: %+v, %v; want %+v", got, err, want)
	}
	if v, err := s.CredentialValue(ctx(t), "gemini"); err != nil || string(v) != "AIza-value" {
		t.Fatalf("reopened value: %q, %v", v, err)
	}
}
