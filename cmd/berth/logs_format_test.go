package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A daemon whose stderr is not a terminal logs JSON lines; each request
// has an id (the client's X-Request-ID when sane, else one made), in its
// answer and in its log line with the session it is about; lines about a
// session carry session_id, and about a turn turn_id. The requests and
// the store's migrations are logged at debug.
func TestLogsAreJSONWithRequestAndSessionIDs(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, "--log-level", "debug")
	sess := s.create(t, nil)
	get := func(id string) string {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/v1/sessions/"+sess.ID, nil)
		s.authorize(req)
		req.Header.Set("X-Request-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Request-ID")
	}
	if got := get("build-42:step.1"); got != "build-42:step.1" {
		t.Errorf("X-Request-ID answered %q, want the client's", got)
	}
	made := get("forged\" level=ERROR msg=x")
	if !strings.HasPrefix(made, "req_") {
		t.Errorf("an unsafe X-Request-ID was kept: %q", made)
	}
	// A turn the agent will not let go of: the daemon kills it, a line about
	// the session and the turn.
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "crash 3"}, nil); st != 200 {
		t.Fatalf("prompt = %d", st)
	}
	s.stop()

	var sawRequest, sawMade, sawSession, sawMigration bool
	sc := bufio.NewScanner(strings.NewReader(s.log.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		switch {
		case line["msg"] == "http request" && line["request_id"] == "build-42:step.1":
			sawRequest = line["session_id"] == sess.ID && line["status"] == float64(200) && line["level"] == "DEBUG"
		case strings.Contains(fmt.Sprint(line["msg"]), "applied migration"),
			strings.Contains(fmt.Sprint(line["msg"]), "made from the built-in empty store"):
			sawMigration = line["level"] == "DEBUG"
		case line["msg"] == "http request" && line["request_id"] == made:
			sawMade = true
		case line["msg"] != "http request" && line["session_id"] == sess.ID:
			sawSession = true
		}
	}
	if !sawRequest || !sawMade || !sawSession || !sawMigration {
		t.Errorf("request line %v, made id %v, a session line %v, the store's making %v in:\n%s", sawRequest, sawMade, sawSession, sawMigration, s.log.String())
	}
}

// At the default level the daemon's terminal gets one line saying where
// it listens, then the sessions' starts and stops: no migration of a new
// store, no word of its shim, no line per request.
func TestServeTerminalIsQuiet(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, "--log-format", "text")
	sess := s.create(t, nil)
	s.cli(t, "ls")
	s.turn(t, sess.ID, "echo hi")
	s.stop()
	out := s.log.String()
	if strings.Count(out, `msg="berth serving"`) != 1 || !strings.Contains(out, "addr="+s.addr) {
		t.Errorf("no one line saying where the daemon listens:\n%s", out)
	}
	// Nothing before it: what the start does is said at debug.
	before, _, _ := strings.Cut(out, `msg="berth serving"`)
	if i := strings.LastIndexByte(before, '\n'); i >= 0 && strings.Contains(before[:i], "level=INFO") {
		t.Errorf("info lines before berth serving:\n%s", out)
	}
	for _, noise := range []string{"http request", "migration", "level=DEBUG"} {
		if strings.Contains(out, noise) {
			t.Errorf("the terminal shows %q at the default level:\n%s", noise, out)
		}
	}
}

// --log-format text logs text; a bad level or format is a usage error.
func TestLogFlags(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, "--log-format", "text", "--log-level", "debug")
	s.stop()
	if out := s.log.String(); !strings.Contains(out, `level=INFO msg="berth serving"`) {
		t.Errorf("text log: %s", out)
	}
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		cmd := exec.Command(bin, append([]string{"serve", "--home", t.TempDir(), "--addr", freeAddr(t)}, args...)...)
		cmd.Env = cleanEnv(home)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("serve %v: exit %d, want 2: %s", args, code, out)
		}
	}
}

// [server] log_format and log_level set the log as the flags do; a bad
// value stops the start naming the key.
func TestLogConfigKeys(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[server]\nlog_format = \"text\"\nlog_level = \"warn\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	s.stop()
	if out := s.log.String(); strings.Contains(out, `msg="berth serving"`) || strings.Contains(out, `"msg":`) {
		t.Errorf("log_format text, log_level warn: the info line was logged, or as JSON:\n%s", out)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "config.toml"), []byte("[server]\nlog_format = \"yaml\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--home", bad, "--addr", freeAddr(t))
	cmd.Env = cleanEnv(bad)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "server.log_format") {
		t.Errorf("log_format yaml: exit %d: %s", code, out)
	}
}
