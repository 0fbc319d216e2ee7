package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// doctor runs `berth doctor -o json` on home with extra environment and
// returns its report and exit code.
func doctor(t *testing.T, home string, env ...string) (doctorReport, int) {
	t.Helper()
	cmd := exec.Command(bin, "doctor", "-o", "json")
	cmd.Env = cleanEnv(home, env...)
	out, _ := cmd.Output()
	var r doctorReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("doctor -o json printed %q: %v", out, err)
	}
	return r, cmd.ProcessState.ExitCode()
}

// checkOf is the named check of a report.
func checkOf(t *testing.T, r doctorReport, name string) check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return check{}
}

// A healthy home with its daemon running: every check passes or is a
// warning about something the config does not use, and doctor exits 0.
func TestDoctorHealthyHome(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	r, code := doctor(t, home, "BERTH_ADDR="+s.addr, "DOCKER_HOST=unix:///nonexistent/docker.sock")
	if code != 0 || !r.OK {
		t.Fatalf("exit %d, report %+v", code, r)
	}
	for name, want := range map[string]string{"config": checkOK, "home": checkOK, "daemon": checkOK, "store": checkOK, "agent demo": checkOK, "sandbox docker": checkWarn} {
		if c := checkOf(t, r, name); c.Status != want {
			t.Errorf("%s: %+v, want %s", name, c, want)
		}
	}
	if c := checkOf(t, r, "store"); !strings.Contains(c.Detail, "quick_check") {
		t.Errorf("store check did not look inside the database: %+v", c)
	}
}

// What the config relies on and is broken fails the doctor (exit 1), each
// named: a damaged store, the default sandbox's engine, a configured
// agent's command, a config that does not load.
func TestDoctorFailsWhatTheConfigNeeds(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "berth.db"), []byte("this is not a database, it is a text file long enough to have a header at all: padding padding padding padding"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `[sandbox]
default = "docker"

[[agents]]
name = "mine"
command = "/nonexistent/my-agent"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r, code := doctor(t, home, "DOCKER_HOST=unix:///nonexistent/docker.sock")
	if code != 1 || r.OK {
		t.Fatalf("exit %d, ok %v, want 1 and false", code, r.OK)
	}
	for name, detail := range map[string]string{"store": "not a SQLite database", "sandbox docker": "no engine", "agent mine": "/nonexistent/my-agent not found"} {
		if c := checkOf(t, r, name); c.Status != checkFail || !strings.Contains(c.Detail, detail) {
			t.Errorf("%s: %+v, want fail with %q", name, c, detail)
		}
	}
	// Built-in agents that are not installed are not the config's: skipped.
	if c := checkOf(t, r, "agent kimi"); c.Status != checkSkip {
		t.Errorf("agent kimi: %+v, want skip", c)
	}

	// A config that does not load is a failure of its own.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[sandbox\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, code := doctor(t, home); code != 1 || checkOf(t, r, "config").Status != checkFail {
		t.Errorf("broken config: exit %d, %+v", code, r.Checks)
	}
}

// An agent's credentials are found in its pass_env variables; none found
// is a warning naming where they would come from.
func TestDoctorNamesAgentCredentials(t *testing.T) {
	home := t.TempDir()
	cfg := `[[agents]]
name = "mine"
command = "` + bin + `"
args = ["agent-demo"]
pass_env = ["MY_AGENT_API_KEY"]
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ := doctor(t, home, "HOME="+t.TempDir())
	if c := checkOf(t, r, "agent mine"); c.Status != checkWarn || !strings.Contains(c.Detail, "MY_AGENT_API_KEY") {
		t.Errorf("without a key: %+v", c)
	}
	r, _ = doctor(t, home, "HOME="+t.TempDir(), "MY_AGENT_API_KEY=sk-test")
	if c := checkOf(t, r, "agent mine"); c.Status != checkOK || !strings.Contains(c.Detail, "credentials: $MY_AGENT_API_KEY") || strings.Contains(c.Detail, "sk-test") {
		t.Errorf("with a key: %+v", c)
	}
}

// An agent the model gateway points says which credential it needs, and
// how to set it, until the daemon keeps it; without a daemon it says it
// cannot tell.
func TestDoctorNamesGatewayCredentials(t *testing.T) {
	home := t.TempDir()
	cfg := `[[agents]]
name = "mine"
command = "` + bin + `"
args = ["agent-demo"]
model_api = "anthropic"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ := doctor(t, home, "HOME="+t.TempDir())
	if c := checkOf(t, r, "agent mine"); c.Status != checkWarn || !strings.Contains(c.Detail, "cannot tell") || !strings.Contains(c.Detail, "berth credentials set anthropic") {
		t.Errorf("without a daemon: %+v", c)
	}
	s := startServer(t, home)
	r, _ = doctor(t, home, "BERTH_ADDR="+s.addr)
	if c := checkOf(t, r, "agent mine"); c.Status != checkWarn || !strings.Contains(c.Detail, `the credential "anthropic" is not set: berth credentials set anthropic`) {
		t.Errorf("not set: %+v", c)
	}
	if out, code := s.cliWith(t, "sk-doctor-test\n", nil, "credentials", "set", "anthropic"); code != 0 {
		t.Fatalf("credentials set: %d %s", code, out)
	}
	r, _ = doctor(t, home, "BERTH_ADDR="+s.addr)
	if c := checkOf(t, r, "agent mine"); c.Status != checkOK || !strings.Contains(c.Detail, `with the credential "anthropic"`) || strings.Contains(c.Detail, "sk-doctor-test") {
		t.Errorf("set: %+v", c)
	}
}

// The doctor tries bwrap for real, as its user (the daemon's): a trial
// sandbox without network and one with, each reported ok only once it
// ran. (Finding slirp4netns installed said "ok" while, as an ordinary
// user, every sandbox with network failed.)
func TestDoctorTriesBwrapSandboxes(t *testing.T) {
	if err := bwrap.New(bwrap.Options{}).Probe(t.Context()); err != nil {
		testenv.Missing(t, "bwrap", "%v", err)
	}
	r, _ := doctor(t, t.TempDir(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
	for name, detail := range map[string]string{"sandbox bwrap": "a trial sandbox ran", "sandbox bwrap network": "a trial sandbox with network ran"} {
		if c := checkOf(t, r, name); c.Status != checkOK || !strings.Contains(c.Detail, detail) {
			t.Errorf("%s: %+v, want ok: %q", name, c, detail)
		}
	}
}

// A trial sandbox that does not start is reported in the failing tool's
// own words: a failure when sessions use bwrap with network, a warning
// when none may have network.
func TestDoctorSaysWhyBwrapNetworkFails(t *testing.T) {
	if err := bwrap.New(bwrap.Options{}).Probe(t.Context()); err != nil {
		testenv.Missing(t, "bwrap", "%v", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "slirp4netns")
	const words = "slirp4netns: setegid(0): Invalid argument"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho '"+words+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := bwrap.New(bwrap.Options{Slirp: fake})
	for _, network := range []bool{true, false} {
		cs := checkBwrap(t.Context(), p, bwrapNeeds{bwrap: true, used: true, network: network})
		var c check
		for _, c = range cs {
			if c.Name == "sandbox bwrap network" {
				break
			}
		}
		want := checkFail
		if !network {
			want = checkWarn
		}
		if c.Status != want || !strings.Contains(c.Detail, words) {
			t.Errorf("allow_network %v: %+v, want %s in slirp4netns's words", network, c, want)
		}
		if cs[0].Status != checkOK {
			t.Errorf("without network: %+v", cs[0])
		}
	}
}

// An engine whose socket the doctor's user may not use is a warning
// saying so and how to be let in (its group), when docker is not the
// default sandbox. (A socket's mode refuses no root: as root the socket
// is missing instead, the warning's other reason.)
func TestDoctorDockerSocketRefused(t *testing.T) {
	sock, refused := unusableEngineSocket(t)
	want := "no such file"
	if refused {
		want = "usermod -aG"
	}
	r, _ := doctor(t, t.TempDir(), "DOCKER_HOST=unix://"+sock)
	if c := checkOf(t, r, "sandbox docker"); c.Status != checkWarn || !strings.Contains(c.Detail, want) {
		t.Errorf("sandbox docker: %+v, want a warning saying %q", c, want)
	}
}

// unusableEngineSocket returns a Docker engine socket this user cannot
// use: as a user, one whose mode refuses it (refused); as root, whom a
// socket's mode refuses nothing, a path where there is none.
func unusableEngineSocket(t *testing.T) (sock string, refused bool) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "engine.sock")
	if os.Geteuid() == 0 {
		return sock, false
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(sock, 0); err != nil {
		t.Fatal(err)
	}
	return sock, true
}
