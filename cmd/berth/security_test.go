package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// rawAPI sends one request over TCP with exactly the headers given (no
// token unless one is among them) and returns the status.
func rawAPI(t *testing.T, s *server, method, path, body string, header ...string) int {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sessionCount counts the sessions the daemon lists.
func sessionCount(t *testing.T, s *server) int {
	t.Helper()
	var page berth.SessionPage
	if st, err := s.api("GET", "/v1/sessions?limit=1000", nil, &page); st != 200 {
		t.Fatalf("list sessions = %d %v", st, err)
	}
	return len(page.Sessions)
}

func TestServeGeneratesAndKeepsTheToken(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	path := filepath.Join(home, bclient.TokenFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file = %v %v, want mode 0600", fi, err)
	}
	tok := readTokenFile(home)
	if len(tok) < 43 {
		t.Fatalf("token %d characters, want 256 bits", len(tok))
	}
	if st := rawAPI(t, s, "GET", "/v1/health", ""); st != 401 {
		t.Errorf("health without the token = %d, want 401", st)
	}
	if st := rawAPI(t, s, "GET", "/v1/health", "", "Authorization", "Bearer "+tok); st != 200 {
		t.Errorf("health with the token = %d", st)
	}
	// The CLI over TCP reads it from the home; over the socket it needs none.
	for _, args := range [][]string{{"--addr", s.addr, "ls"}, {"ls"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv(home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("berth %v: %v %s", args, err, out)
		}
	}
	// A restart keeps it.
	s.stop()
	if strings.Contains(s.log.String(), tok) {
		t.Error("the token is in the daemon's log")
	}
	startServer(t, home)
	if got := readTokenFile(home); got != tok {
		t.Errorf("the token changed across a restart")
	}
}

func TestLoopbackWithoutTokenWarns(t *testing.T) {
	home := t.TempDir()
	s := startServerEnv(t, home, []string{"BERTH_SERVER_LOOPBACK_WITHOUT_TOKEN=true"})
	if st := rawAPI(t, s, "GET", "/v1/health", ""); st != 200 {
		t.Errorf("health without a token = %d, want 200", st)
	}
	if _, err := os.Stat(filepath.Join(home, bclient.TokenFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a token file was made: %v", err)
	}
	// The browser guards hold without a token too.
	if st := rawAPI(t, s, "POST", "/v1/sessions", `{"agent":"demo","prompt":"run id"}`,
		"Origin", "http://evil.example", "Content-Type", "text/plain;charset=UTF-8"); st != 403 {
		t.Errorf("cross-origin create without a token = %d, want 403", st)
	}
	// The log is whole once the daemon has exited.
	s.stop()
	if !strings.Contains(s.log.String(), "loopback_without_token") {
		t.Errorf("no warning in the log:\n%s", s.log)
	}
}

// TestFoundAttackCreatesNothing replays a cross-site attack (a no-cors fetch
// from a page of another origin) against a real daemon: nothing is created,
// written or run.
func TestFoundAttackCreatesNothing(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	marker := filepath.Join(t.TempDir(), "ran")
	body := `{"agent":"demo","sandbox":"host","prompt":"run touch ` + marker + `"}`
	tok := "Bearer " + readTokenFile(home)
	for _, header := range [][]string{
		// The no-cors fetch as found, without and with the token (a token
		// leaked to a page must not help it).
		{"Origin", "http://evil.example", "Content-Type", "text/plain;charset=UTF-8", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://evil.example", "Content-Type", "application/json", "Authorization", tok},
		// DNS rebinding: the page's own name, resolving to 127.0.0.1.
		{"Host", "rebound.evil.example:7380", "Origin", "http://rebound.evil.example:7380", "Content-Type", "application/json", "Authorization", tok},
		// Same origin but not JSON.
		{"Content-Type", "text/plain", "Authorization", tok},
	} {
		if st := rawAPI(t, s, "POST", "/v1/sessions", body, header...); st != 403 && st != 415 {
			t.Errorf("attack %v = %d, want 403 or 415", header, st)
		}
	}
	if n := sessionCount(t, s); n != 0 {
		t.Errorf("%d sessions after refused requests", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the attack's command ran")
	}
}

func TestOverflowingNumbersAreRefused(t *testing.T) {
	s := startServer(t, t.TempDir())
	for _, body := range []string{
		`{"agent":"demo","sandbox":"host","ttl_seconds":9223372036854775807}`,
		`{"agent":"demo","sandbox":"host","idle_timeout_seconds":9223372036854775807}`,
		`{"agent":"demo","sandbox":"host","ttl_seconds":-1}`,
		`{"agent":"demo","sandbox":"host","ttl_seconds":315360001}`,
	} {
		var e errorBody
		if st, _ := s.api("POST", "/v1/sessions", body, &e); st != 400 || e.Error.Code != berth.EInvalid ||
			!strings.Contains(e.Error.Message, "_seconds") {
			t.Errorf("%s = %d %+v", body, st, e)
		}
	}
	if n := sessionCount(t, s); n != 0 {
		t.Errorf("%d sessions stored from refused creates", n)
	}
	// The largest allowed TTL makes a session that does not expire at once.
	var sess berth.Session
	if st, err := s.api("POST", "/v1/sessions", `{"agent":"demo","sandbox":"host","ttl_seconds":315360000}`, &sess); st != 201 {
		t.Fatalf("create at the largest ttl = %d %v", st, err)
	}
	if sess.State != berth.StateActive || sess.ExpiresAt == nil || sess.ExpiresAt.Before(time.Now().Add(24*time.Hour)) {
		t.Errorf("session at the largest ttl = %s expires %v", sess.State, sess.ExpiresAt)
	}
}

func TestUICommandSignsInOnce(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	cmd := exec.Command(bin, "ui", "--no-open")
	cmd.Env = cleanEnv(home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berth ui: %v %s", err, out)
	}
	url := strings.TrimSpace(string(out))
	prefix := "http://" + s.addr + "/login#code="
	if !strings.HasPrefix(url, prefix) || strings.Contains(url, readTokenFile(home)) {
		t.Fatalf("berth ui printed %q, want %s<code>", url, prefix)
	}
	code := strings.TrimPrefix(url, prefix)
	login := func() *http.Response {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/v1/login", strings.NewReader(`{"code":"`+code+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := login()
	if resp.StatusCode != 204 || len(resp.Cookies()) != 1 {
		t.Fatalf("login with the code = %d %v", resp.StatusCode, resp.Cookies())
	}
	if st := rawAPI(t, s, "GET", "/v1/sessions", "", "Cookie", "berth_session="+resp.Cookies()[0].Value); st != 200 {
		t.Errorf("API with the cookie = %d", st)
	}
	if resp := login(); resp.StatusCode != 401 {
		t.Errorf("the code a second time = %d, want 401", resp.StatusCode)
	}
}

// TestHomeIsPrivate walks a fresh home after a session was created: nothing
// the daemon alone reads may be open to the group or others. Managed
// workspaces stay usable by sandboxes that run as another uid.
func TestHomeIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	// A home that exists already, open to others, is made private.
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	s.create(t, map[string]any{"prompt": "echo hi"})
	var listing bytes.Buffer
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		listing.WriteString(fi.Mode().String() + " " + rel + "\n")
		// A managed workspace is the sandbox's: its inside is not the
		// daemon's secret (its parent directory still is).
		if d.IsDir() && filepath.Base(filepath.Dir(path)) == "workspaces" {
			return filepath.SkipDir
		}
		// So is the view of /etc, copies of what the host lets every user
		// read, which the sandbox's uid reads (run, its parent, is not).
		if d.IsDir() && rel == filepath.Join("run", "etc") {
			return filepath.SkipDir
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: open to the group or others", rel, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.Logf("home:\n%s", listing.String())
	}
}

// The host's /tmp as a workspace, the attack of the third round, replayed
// against a real daemon (root or not): a bwrap session in /tmp, /var/tmp,
// /mnt or /media is 400 invalid_argument naming workspace and saying why;
// nothing is created, /tmp keeps its mode and a private file in it its
// owner and mode.
func TestHostTmpIsNotAWorkspace(t *testing.T) {
	s := startServer(t, t.TempDir())
	victim, err := os.CreateTemp("/tmp", "berth-test-private-")
	if err != nil {
		t.Fatal(err)
	}
	victim.Close()
	t.Cleanup(func() { _ = os.Remove(victim.Name()) })
	if err := os.Chmod(victim.Name(), 0o600); err != nil {
		t.Fatal(err)
	}
	stat := func(p string) syscall.Stat_t {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	tmpBefore, victimBefore := stat("/tmp"), stat(victim.Name())
	for _, ws := range []string{"/tmp", "/var/tmp", "/mnt", "/media"} {
		if fi, err := os.Lstat(ws); err != nil || !fi.IsDir() {
			continue
		}
		var body errorBody
		st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "bwrap", "workspace": ws}, &body)
		if st != 400 || body.Error.Code != berth.EInvalid || body.Error.Details["field"] != "workspace" ||
			!strings.Contains(body.Error.Message, "workspace "+ws+" refused: it is") {
			t.Errorf("create in %s = %d %+v (%v), want 400 invalid_argument naming workspace and saying why", ws, st, body.Error, err)
		}
	}
	if n := sessionCount(t, s); n != 0 {
		t.Errorf("%d sessions after the refusals", n)
	}
	if got := stat("/tmp"); got.Mode != tmpBefore.Mode || got.Uid != tmpBefore.Uid {
		t.Errorf("/tmp is now mode %o uid %d, was %o %d", got.Mode, got.Uid, tmpBefore.Mode, tmpBefore.Uid)
	}
	if got := stat(victim.Name()); got.Mode != victimBefore.Mode || got.Uid != victimBefore.Uid {
		t.Errorf("the private file in /tmp is now mode %o uid %d, was %o %d", got.Mode, got.Uid, victimBefore.Mode, victimBefore.Uid)
	}
}
