package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/berth-sh/berth/store/sqlite"
)

// secretValue returns a credential value no output holds by chance.
func secretValue() string {
	return "sk-test-" + rand.Text()
}

// leakForms are the forms of a value that would give it away: as it is,
// and in base64 (how JSON carries bytes).
func leakForms(secret string) []string {
	return []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))}
}

// holds reports whether b holds secret in one of its leak forms.
func holds(b []byte, secret string) bool {
	for _, f := range leakForms(secret) {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// cliWith runs the berth CLI against s with stdin and extra environment,
// and returns its stdout and stderr together, and its exit code.
func (s *server) cliWith(t *testing.T, stdin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", s.addr}, args...)...)
	cmd.Env = cleanEnv(s.home, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// raw makes one request and returns the answer's status and bytes.
func (s *server) raw(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.request(method, path, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// storedValue reads a credential's value from a SQLite store's credentials
// file, which only the store reads otherwise.
func storedValue(t *testing.T, home, name string) string {
	t.Helper()
	raw, err := os.ReadFile(sqlite.CredentialsPath(filepath.Join(home, "berth.db")))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Credentials []struct {
			Name  string `json:"name"`
			Value []byte `json:"value"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Credentials {
		if c.Name == name {
			return string(c.Value)
		}
	}
	t.Fatalf("credential %s is not in the credentials file", name)
	return ""
}

// A credential's value, set through the CLI (stdin and --from-env) and the
// API, never appears again: not in any CLI output or API answer (the
// credentials, sessions, events, transcript, exec of env in a session,
// metrics, health), not in the daemon's log at debug level, and not in any
// file of the home but the credentials file (berth.db included).
func TestCredentialValueNeverShown(t *testing.T) {
	home := shortHome(t)
	writeConfig(t, home, "[server]\nlog_level = \"debug\"\n")
	s := startServer(t, home)
	secret, secret2 := secretValue(), secretValue()
	var shown []string

	out, code := s.cliWith(t, secret+"\n", nil, "credentials", "set", "anthropic")
	if code != 0 || !strings.Contains(out, "credential anthropic set (api_key)") {
		t.Fatalf("set from stdin: exit %d\n%s", code, out)
	}
	shown = append(shown, out)
	out, code = s.cliWith(t, "", []string{"OPENAI_KEY=" + secret2}, "credentials", "set", "openai", "--from-env", "OPENAI_KEY", "-o", "json")
	var c berth.Credential
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.Name != "openai" {
		t.Fatalf("set --from-env: exit %d\n%s", code, out)
	}
	shown = append(shown, out)
	if got := storedValue(t, home, "anthropic"); got != secret {
		t.Fatalf("stored %q, want the value without its newline", got)
	}
	if got := storedValue(t, home, "openai"); got != secret2 {
		t.Fatalf("stored %q from the environment", got)
	}
	for _, args := range [][]string{{"credentials", "ls"}, {"credentials", "ls", "-o", "json"}} {
		out := s.cli(t, args...)
		if !strings.Contains(out, "anthropic") || !strings.Contains(out, "openai") {
			t.Fatalf("berth %s:\n%s", strings.Join(args, " "), out)
		}
		shown = append(shown, out)
	}

	// Mistakes: exit 2 for a bad name or an empty variable, 3 for an
	// unknown name; a value refused by the daemon is not quoted.
	for _, c := range []struct {
		stdin string
		env   []string
		args  []string
		exit  int
	}{
		{secret, nil, []string{"credentials", "set", "Bad/Name"}, exitUsage},
		{"", nil, []string{"credentials", "set", "x", "--from-env", "BERTH_TEST_UNSET_VAR"}, exitUsage},
		{"", nil, []string{"credentials", "set", "x"}, exitUsage},
		{"", nil, []string{"credentials", "rm", "missing"}, exitNotFound},
		{secret + "\x00", nil, []string{"credentials", "set", "x"}, exitFailure},
		{"", nil, []string{"credentials", "set", secret}, exitUsage},
	} {
		out, code := s.cliWith(t, c.stdin, c.env, c.args...)
		if code != c.exit {
			t.Errorf("berth %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.exit, out)
		}
		shown = append(shown, out)
	}
	for _, body := range []any{map[string]string{"value": secret + "\n"}, map[string]any{"value": secret, "kind": "bad"}} {
		st, b := s.raw(t, "PUT", "/v1/credentials/x", body)
		if st != 400 {
			t.Fatalf("bad put = %d %s", st, b)
		}
		shown = append(shown, string(b))
	}

	// A session runs, and its agent's environment is looked at.
	sess := s.create(t, nil)
	s.turn(t, sess.ID, "echo hi")
	st, b := s.raw(t, "POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"command": []string{"env"}})
	if st != 200 || !bytes.Contains(b, []byte("PATH=")) {
		t.Fatalf("exec env = %d %s", st, b)
	}
	shown = append(shown, string(b))
	for _, path := range []string{"/v1/credentials", "/v1/sessions/" + sess.ID, "/v1/sessions?limit=100", "/v1/sessions/" + sess.ID + "/events?limit=1000",
		"/v1/sessions/" + sess.ID + "/transcript", "/metrics", "/v1/health", "/v1/nodes", "/v1/hooks/deliveries"} {
		st, b := s.raw(t, "GET", path, nil)
		if st != 200 {
			t.Fatalf("GET %s = %d %s", path, st, b)
		}
		shown = append(shown, string(b))
	}
	out = s.cli(t, "credentials", "rm", "openai")
	shown = append(shown, out)
	s.stop()

	for i, text := range shown {
		if holds([]byte(text), secret) || holds([]byte(text), secret2) {
			t.Errorf("output %d holds a value:\n%s", i, text)
		}
	}
	if holds([]byte(s.log.String()), secret) || holds([]byte(s.log.String()), secret2) {
		t.Errorf("the daemon's log holds a value:\n%s", s.log)
	}
	if !strings.Contains(s.log.String(), "/v1/credentials") {
		t.Errorf("the log at debug level shows no credential request: the check above saw nothing:\n%s", s.log)
	}
	credFile := sqlite.CredentialsPath(filepath.Join(home, "berth.db"))
	files := 0
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == credFile {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if holds(b, secret) || holds(b, secret2) {
			t.Errorf("%s holds a value", strings.TrimPrefix(p, home))
		}
		return nil
	})
	if err != nil || files < 3 {
		t.Fatalf("walked %d files of the home: %v", files, err)
	}
	if fi, err := os.Stat(credFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
}

// On PostgreSQL: berth credentials keygen makes the key file, a daemon
// with it keeps the value sealed (no table holds it, in any form), and a
// daemon without key_file refuses to set one, saying how to set it, and
// still lists them.
func TestCredentialsOnPostgres(t *testing.T) {
	db := freshPostgres(t)
	home := shortHome(t)
	key := filepath.Join(home, "credentials.key")
	keygen := exec.Command(bin, "credentials", "keygen", key)
	keygen.Env = cleanEnv(home)
	if out, err := keygen.CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	again := exec.Command(bin, "credentials", "keygen", key)
	again.Env = cleanEnv(home)
	if out, err := again.CombinedOutput(); again.ProcessState.ExitCode() != exitConflict {
		t.Fatalf("a second keygen on the same path: %v\n%s", err, out)
	}
	writeConfig(t, home, "[credentials]\nkey_file = \""+key+"\"\n")
	s := startServer(t, home, "--store", db)
	secret := secretValue()
	if out, code := s.cliWith(t, secret, nil, "credentials", "set", "anthropic"); code != 0 {
		t.Fatalf("set: exit %d\n%s", code, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tables := pgtest.TableRows(t, ctx, conn)
	if _, ok := tables["credentials"]; !ok {
		t.Fatalf("no credentials table among %d", len(tables))
	}
	for table, texts := range tables {
		for _, text := range texts {
			if holds([]byte(text), secret) || strings.Contains(text, hex.EncodeToString([]byte(secret))) {
				t.Errorf("table %s holds the value: %s", table, text)
			}
		}
	}
	s.stop()
	if holds([]byte(s.log.String()), secret) {
		t.Errorf("the daemon's log holds the value:\n%s", s.log)
	}

	writeConfig(t, home, "")
	s = startServer(t, home, "--store", db)
	out, code := s.cliWith(t, "sk-other", nil, "credentials", "set", "openai")
	if code != exitFailure || !strings.Contains(out, "[credentials] key_file") {
		t.Fatalf("set without a key file: exit %d\n%s", code, out)
	}
	if out := s.cli(t, "credentials", "ls"); !strings.Contains(out, "anthropic") {
		t.Fatalf("ls without a key file:\n%s", out)
	}
}

// At a terminal, berth credentials set asks for the value without echoing
// it, and stores what was typed.
func TestCredentialsSetAtATerminal(t *testing.T) {
	home := shortHome(t)
	s := startServer(t, home)
	secret := secretValue()
	tm := startTerminal(t, s.cliEnv(), "credentials", "set", "gemini")
	tm.waitFor("(not shown)")
	tm.typeLine(secret)
	if code := tm.exitCode(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, tm.printed())
	}
	shown := tm.waitFor("credential gemini set")
	if strings.Contains(shown, secret) {
		t.Fatalf("the terminal echoed the value:\n%s", shown)
	}
	if got := storedValue(t, home, "gemini"); got != secret {
		t.Fatalf("stored %q, want what was typed", got)
	}
}

// An interrupt at the value's prompt ends berth credentials set at once,
// with nothing set and the terminal's echo on again.
func TestCredentialsSetInterruptedAtATerminal(t *testing.T) {
	home := shortHome(t)
	s := startServer(t, home)
	tm := startTerminal(t, s.cliEnv(), "credentials", "set", "gemini")
	tm.waitFor("(not shown)")
	if _, err := tm.pty.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	if code := tm.exitCode(); code == 0 {
		t.Fatalf("exit 0 after an interrupt:\n%s", tm.printed())
	}
	tio, err := unix.IoctlGetTermios(int(tm.pty.Fd()), unix.TCGETS)
	if err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Fatalf("the terminal's echo is off after the interrupt: %+v, %v", tio, err)
	}
	if out := s.cli(t, "credentials", "ls"); strings.Contains(out, "gemini") {
		t.Fatalf("an interrupted set stored a credential:\n%s", out)
	}
}
