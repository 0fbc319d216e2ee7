package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A key made by the caller (derived from the session) is the session's
// until it is unregistered or replaced; a malformed one is refused.
func TestRegisterKey(t *testing.T) {
	e := newEnv(t)
	var b [KeyBytes]byte
	copy(b[:], "derived from the session's id and a secret")
	key := Key(b)
	if err := e.gw.RegisterKey("ses_a", key); err != nil {
		t.Fatal(err)
	}
	c := kindCalls()[0]
	if a := e.send(c, key); a.status != http.StatusOK {
		t.Fatalf("registered key: %d %s", a.status, a.body)
	}
	// The same key again (a daemon that restarted) works as before.
	if err := e.gw.RegisterKey("ses_a", key); err != nil {
		t.Fatal(err)
	}
	if a := e.send(c, key); a.status != http.StatusOK {
		t.Fatalf("registered again: %d %s", a.status, a.body)
	}
	e.gw.Unregister("ses_a")
	if a := e.send(c, key); a.status != http.StatusUnauthorized {
		t.Fatalf("unregistered key: %d %s", a.status, a.body)
	}
	for _, bad := range []string{"", key[:len(key)-1], strings.Replace(key, keyPrefix, "berth-xx-", 1), key[:len(key)-1] + "*"} {
		if err := e.gw.RegisterKey("ses_b", bad); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("RegisterKey(%q) = %v, want EInvalid", bad, err)
		}
	}
}
