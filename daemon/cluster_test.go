package daemon

import (
	"net/url"
	"testing"
	"time"
)

// A cluster node's store connections end a transaction left idle for
// half the lease TTL, unless the URL sets the limit itself.
func TestClusterStoreURLBoundsIdleTransactions(t *testing.T) {
	for _, tc := range []struct {
		url  string
		ttl  time.Duration
		want string
	}{
		{"postgres://u@h:5432/db?sslmode=disable", 10 * time.Second, "5000"},
		{"postgres://u@h/db", time.Second, "500"},
		{"postgres://u@h/db?idle_in_transaction_session_timeout=7000", 10 * time.Second, "7000"},
	} {
		u, err := url.Parse(clusterStoreURL(tc.url, tc.ttl))
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Query().Get(idleTxParam); got != tc.want {
			t.Errorf("%s, ttl %s: %s = %q, want %q", tc.url, tc.ttl, idleTxParam, got, tc.want)
		}
		if tc.url == "postgres://u@h:5432/db?sslmode=disable" && u.Query().Get("sslmode") != "disable" {
			t.Errorf("the URL's own parameters were lost: %s", u)
		}
	}
}
