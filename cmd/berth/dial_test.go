package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
)

// isolateEnv clears the environment variables the CLI reads.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"BERTH_ADDR", "BERTH_HOME", "BERTH_TOKEN", "NO_COLOR"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", t.TempDir())
}

// dialWith runs a probe command with args and returns what dial gave.
func dialWith(t *testing.T, args ...string) (*bclient.Client, error) {
	t.Helper()
	root := newRootCommand()
	var c *bclient.Client
	var derr error
	root.AddCommand(&cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
		c, derr = dial(cmd)
		return nil
	}})
	root.SetArgs(append([]string{"probe"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("probe %v: %v", args, err)
	}
	if c != nil {
		t.Cleanup(c.Close)
	}
	return c, derr
}

func TestDialResolution(t *testing.T) {
	isolateEnv(t)
	home, err := os.MkdirTemp("", "bh")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	emptyHome := t.TempDir()

	// A live socket in home.
	sock := filepath.Join(home, "berth.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default without a socket", nil, []string{"--home", emptyHome}, "http://127.0.0.1:7380"},
		{"socket in --home", nil, []string{"--home", home}, sock},
		{"socket in BERTH_HOME", map[string]string{"BERTH_HOME": home}, nil, sock},
		{"--home beats BERTH_HOME", map[string]string{"BERTH_HOME": home}, []string{"--home", emptyHome}, "http://127.0.0.1:7380"},
		{"--addr beats the socket", nil, []string{"--home", home, "--addr", "127.0.0.1:9"}, "http://127.0.0.1:9"},
		{"BERTH_ADDR beats the socket", map[string]string{"BERTH_ADDR": "http://10.0.0.1:7380"}, []string{"--home", home}, "http://10.0.0.1:7380"},
		{"--addr beats BERTH_ADDR", map[string]string{"BERTH_ADDR": "127.0.0.1:1"}, []string{"--addr", "127.0.0.1:2"}, "http://127.0.0.1:2"},
		{"unix: address", nil, []string{"--addr", "unix:" + sock}, sock},
		{"https address", nil, []string{"--addr", "https://berth.example:443/"}, "https://berth.example:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := dialWith(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Target() != tt.want {
				t.Errorf("target = %q, want %q", c.Target(), tt.want)
			}
		})
	}

	// A regular file named berth.sock is not a socket: TCP default.
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "berth.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := dialWith(t, "--home", fake); err != nil || c.Target() != "http://127.0.0.1:7380" {
		t.Errorf("home with a regular berth.sock: %v, %v", c, err)
	}
	// The default home is ~/.berth.
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".berth"), 0o700); err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("unix", filepath.Join(home, ".berth", "berth.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if c, err := dialWith(t); err != nil || c.Target() != filepath.Join(home, ".berth", "berth.sock") {
		t.Errorf("default home: %v, %v", c, err)
	}
	if _, err := dialWith(t, "--addr", "unix:"); exitCode(err) != 2 {
		t.Errorf("--addr unix: = %v", err)
	}
}

// Over TCP the CLI sends --token, else $BERTH_TOKEN, else the config's
// token, else the one the daemon keeps in $BERTH_HOME/token.
func TestDialTokenPrecedence(t *testing.T) {
	isolateEnv(t)
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, bclient.TokenFile), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	health := func(args ...string) string {
		t.Helper()
		got = ""
		c, err := dialWith(t, append([]string{"--home", home, "--addr", srv.URL}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if h := health(); h != "Bearer from-file" {
		t.Errorf("token file only: %q", h)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[server]\ntoken = \"from-config\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := health(); h != "Bearer from-config" {
		t.Errorf("config over the file: %q", h)
	}
	t.Setenv("BERTH_TOKEN", "from-env")
	if h := health(); h != "Bearer from-env" {
		t.Errorf("BERTH_TOKEN over the config: %q", h)
	}
	if h := health("--token", "from-flag"); h != "Bearer from-flag" {
		t.Errorf("--token over BERTH_TOKEN: %q", h)
	}
}

// readTokenFile returns the token a daemon keeps in home ("" when none).
func readTokenFile(home string) string { return bclient.ReadToken(home) }

// A daemon that answers 401 is told in the CLI's words: --token or
// BERTH_TOKEN, from the token file of its home — never the API's
// "send Authorization: Bearer".
func TestCLISpeaksOfTokens(t *testing.T) {
	s := startServer(t, t.TempDir())
	// Another home: no token of the daemon's to send.
	other := t.TempDir()
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "the daemon wants a token: give it with --token or BERTH_TOKEN"},
		{[]string{"BERTH_TOKEN=wrong"}, "the daemon refused the token"},
	} {
		cmd := exec.Command(bin, "--addr", s.addr, "ls")
		cmd.Env = cleanEnv(other, c.env...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), c.want) ||
			!strings.Contains(string(out), "$BERTH_HOME/token") || strings.Contains(string(out), "Authorization") {
			t.Errorf("berth ls %v: exit %d, %q, want %q", c.env, code, out, c.want)
		}
	}
}
