package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/config"
	bhttp "github.com/berth-sh/berth/http"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/berth-sh/berth/internal/testenv"
	_ "modernc.org/sqlite" // the driver the test reads the store's table with
)

// call sends method path to d over TCP, with a JSON body when body is not
// "" and cookie when it is not "", and returns the status and the cookie
// it set ("" for none).
func call(t *testing.T, d *Daemon, method, path, body, cookie string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(t), method, "http://"+d.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: bhttp.CookieName, Value: cookie})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == bhttp.CookieName {
			return resp.StatusCode, c.Value
		}
	}
	return resp.StatusCode, ""
}

// A browser's sign-in outlives a daemon restart; a logout on the restarted
// daemon ends it for the next one too; a new token ends it. The store
// keeps neither the cookie's id nor the token.
func TestSignInOutlivesARestart(t *testing.T) {
	home := testenv.ShortTempDir(t, "berth-signin-")
	start := func(token string) *Daemon {
		cfg := config.Default()
		cfg.Server.Token = token
		d, err := Open(context.Background(), Options{Home: home, Config: cfg, Addr: "127.0.0.1:0", Socket: filepath.Join(home, "berth.sock")})
		if err != nil {
			t.Fatal(err)
		}
		d.Start()
		return d
	}
	signIn := func(d *Daemon) string {
		status, cookie := call(t, d, "POST", "/v1/login", `{"token":"`+d.Token()+`"}`, "")
		if status != 204 || cookie == "" {
			t.Fatalf("login = %d, cookie %q", status, cookie)
		}
		return cookie
	}
	d := start("")
	token := d.Token()
	cookie := signIn(d)
	d.Close(context.Background())

	d = start("")
	if status, _ := call(t, d, "GET", "/v1/sessions", "", cookie); status != 200 {
		t.Fatalf("a sign-in after a restart = %d, want 200", status)
	}
	storeHoldsNeither(t, home, cookie, token)
	if status, _ := call(t, d, "POST", "/v1/logout", "", cookie); status != 204 {
		t.Fatalf("logout = %d", status)
	}
	if status, _ := call(t, d, "GET", "/v1/sessions", "", cookie); status != 401 {
		t.Fatalf("after logout = %d, want 401", status)
	}
	cookie2 := signIn(d)
	d.Close(context.Background())

	d = start("")
	if status, _ := call(t, d, "GET", "/v1/sessions", "", cookie); status != 401 {
		t.Fatalf("a sign-in logged out before the restart = %d, want 401", status)
	}
	d.Close(context.Background())

	d = start("a-new-token-that-replaces-the-generated-one")
	defer d.Close(context.Background())
	if status, _ := call(t, d, "GET", "/v1/sessions", "", cookie2); status != 401 {
		t.Fatalf("a sign-in made with the old token after a new token = %d, want 401", status)
	}
}

// storeHoldsNeither fails unless the store's sign-ins table holds the
// SHA-256 of cookie and nothing of it or of token in clear, and neither
// appears anywhere in the database's files.
func storeHoldsNeither(t *testing.T, home, cookie, token string) {
	t.Helper()
	path := filepath.Join(home, "berth.db")
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, token FROM signins`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := sha256.Sum256([]byte(cookie))
	found := false
	for rows.Next() {
		var id, print []byte
		if err := rows.Scan(&id, &print); err != nil {
			t.Fatal(err)
		}
		found = found || bytes.Equal(id, want[:])
		for _, secret := range []string{cookie, token} {
			if bytes.Contains(id, []byte(secret)) || bytes.Contains(print, []byte(secret)) {
				t.Fatalf("the signins table holds a secret in clear: %x %x", id, print)
			}
		}
	}
	if err := rows.Err(); err != nil || !found {
		t.Fatalf("no row with the cookie's hash (%v)", err)
	}
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(cookie)) || bytes.Contains(b, []byte(token)) {
			t.Fatalf("%s holds the cookie's id or the token", filepath.Base(f))
		}
	}
}

// Two nodes of a cluster on one PostgreSQL share the sign-ins: a cookie
// made on one is accepted by the other, and a logout on the other ends it
// on the first within a few seconds.
func TestSignInIsSharedByClusterNodes(t *testing.T) {
	db := pgtest.Fresh(t, "berth_signin_")
	const token = "the-user-token-both-nodes-have-0123456789"
	node := func(id string) *Daemon {
		home := testenv.ShortTempDir(t, "berth-signin-")
		addr := testenv.FreeAddr(t)
		cfg := config.Default()
		cfg.Server.Token = token
		cfg.Store.URL = db
		cfg.Cluster.NodeID, cfg.Cluster.Advertise, cfg.Cluster.Token = id, "http://"+addr, "the-node-token"
		d, err := Open(context.Background(), Options{Home: home, Config: cfg, Addr: addr, Socket: filepath.Join(home, "berth.sock")})
		if err != nil {
			t.Fatal(err)
		}
		d.Start()
		t.Cleanup(func() { d.Close(context.Background()) })
		return d
	}
	a, b := node("node-a"), node("node-b")
	status, cookie := call(t, a, "POST", "/v1/login", `{"token":"`+token+`"}`, "")
	if status != 204 || cookie == "" {
		t.Fatalf("login on A = %d, cookie %q", status, cookie)
	}
	if status, _ := call(t, b, "GET", "/v1/sessions", "", cookie); status != 200 {
		t.Fatalf("A's sign-in on B = %d, want 200", status)
	}
	if status, _ := call(t, b, "POST", "/v1/logout", "", cookie); status != 204 {
		t.Fatalf("logout on B = %d", status)
	}
	testenv.WaitFor(t, 30*time.Second, "A to refuse a sign-in logged out on B", func() bool {
		status, _ := call(t, a, "GET", "/v1/sessions", "", cookie)
		return status == 401
	})
}
