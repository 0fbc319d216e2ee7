package berth

import (
	"strings"
	"testing"
)

// A kind not given is found from the value; names and values are held to
// their bounds exactly.
func TestCheckCredential(t *testing.T) {
	for value, want := range map[string]string{
		"sk-ant-oat01-abc": CredentialOAuthToken,
		"sk-ant-api03-abc": CredentialAPIKey,
		"AIzaSyA":          CredentialAPIKey,
	} {
		if kind, err := CheckCredential("n", "", []byte(value)); err != nil || kind != want {
			t.Errorf("%s: kind %q, %v; want %s", value, kind, err, want)
		}
	}
	if kind, err := CheckCredential("n", CredentialAPIKey, []byte("sk-ant-oat01-abc")); err != nil || kind != CredentialAPIKey {
		t.Errorf("a kind given is kept: %q, %v", kind, err)
	}
	for _, name := range []string{"a", "0", strings.Repeat("a", 63), "my_key-2", "a-", "9_"} {
		if err := ValidateCredentialName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("a", 64), "_a", "-a", "A", "a.b", "a b", "é", "a\n", "\na", "aA"} {
		if err := ValidateCredentialName(name); ErrorCode(err) != EInvalid {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := CheckCredential("n", "", []byte(strings.Repeat("x", MaxCredentialBytes))); err != nil {
		t.Errorf("a value of the largest size: %v", err)
	}
	for _, v := range []string{"a\tb", "a\x7fb", "\x1b[31m"} {
		if _, err := CheckCredential("n", "", []byte(v)); ErrorCode(err) != EInvalid {
			t.Errorf("%q: %v", v, err)
		}
	}
}
