package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/cmd/berth/internal/childentry"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
)

// exeOf is the program a process runs.
func exeOf(t *testing.T, pid int) string {
	t.Helper()
	exe, err := procfs.Exe(pid)
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	return exe
}

// sessionShim returns the pid of the shim serving session id.
func sessionShim(t *testing.T, home, id string) int {
	t.Helper()
	for pid, sid := range shimSessions(home) {
		if sid == id {
			return pid
		}
	}
	t.Fatalf("no shim serves %s", id)
	return 0
}

// echoSession creates a demo session in sandbox and checks it answers.
func (s *server) echoSession(t *testing.T, sandbox string) berth.Session {
	t.Helper()
	var sess berth.Session
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": sandbox}, &sess); st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create = %d %+v (%v)", st, sess.State, sess.Failure)
	}
	var r berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "echo through the shim"}, &r); st != 200 || r.Text != "through the shim" {
		t.Fatalf("echo = %d %+v %v", st, r, err)
	}
	return sess
}

// installedShims lists the files in home/bin.
func installedShims(home string) []string {
	ents, _ := os.ReadDir(filepath.Join(home, "bin"))
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(home, "bin", e.Name()))
	}
	return out
}

// smallShimBytes is the small shim the test berth carries.
func smallShimBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, smallShimName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Host and bwrap sessions' shims (and the spare) are the small shim the
// berth binary carries, written to $BERTH_HOME/bin; docker sessions' are
// `berth shim`. The daemon says which in its log, at debug.
func TestSessionsRunTheSmallShim(t *testing.T) {
	home := t.TempDir()
	s := startServerEnv(t, home, providerEnv(), "--log-level", "debug")
	// Written once the sandbox probes are over: a first session's shim
	// waits for it.
	s.echoSession(t, berth.SandboxHost)
	installed := installedShims(home)
	if len(installed) != 1 || !strings.HasPrefix(filepath.Base(installed[0]), "berth-shim-") {
		t.Fatalf("home/bin holds %v", installed)
	}
	small := installed[0]
	if b, _ := os.ReadFile(small); !bytes.Equal(b, smallShimBytes(t)) {
		t.Fatalf("%s is not the small shim", small)
	}
	for provider, want := range map[string]string{berth.SandboxHost: small, berth.SandboxBwrap: small, berth.SandboxDocker: bin} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			sess := s.echoSession(t, provider)
			if exe := exeOf(t, sessionShim(t, home, sess.ID)); exe != want {
				t.Fatalf("the %s session's shim runs %s, want %s", provider, exe, want)
			}
		})
	}
	// The spare waiting for the next host or bwrap session is small too.
	for _, pid := range shimsOf(home) {
		if _, serving := shimSessions(home)[pid]; !serving && exeOf(t, pid) != small && exeOf(t, pid) != bin {
			t.Errorf("shim %d runs %s", pid, exeOf(t, pid))
		}
	}
	s.stop()
	if !strings.Contains(s.log.String(), "shims run the small shim") {
		t.Errorf("the log does not say which shim runs:\n%s", s.log)
	}
}

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainBerth is berth built without the small shim, as `go install` does.
func plainBerth(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		plainBin = filepath.Join(binDir, plainBerthName)
		if os.Getenv(binariesEnv) == "" {
			plainErr = goBuild(plainBin, ".", "-")
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}

// A berth that carries no small shim (a plain `go build`) runs `berth
// shim-local` for host sessions, says so once, and its shims stay as small
// as BENCHMARKS.md promises for every build: at most 2 MiB of anonymous
// memory each (issue 26, items 3 and 6; the small shim takes ~1.1 MiB).
func TestWithoutTheSmallShimShimsRunBerth(t *testing.T) {
	plain := plainBerth(t)
	home := t.TempDir()
	s := startServerFree(t, plain, home, nil)
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			sess := s.echoSession(t, provider)
			pid := sessionShim(t, home, sess.ID)
			if exe := exeOf(t, pid); exe != plain {
				t.Fatalf("the shim runs %s, want %s", exe, plain)
			}
			if args, _ := procfs.Cmdline(pid); len(args) < 2 || args[1] != childentry.ShimRole {
				t.Fatalf("the shim runs %q, want berth %s", args, childentry.ShimRole)
			}
			if kib := rssAnonKiB(t, pid); kib > 2048 {
				t.Errorf("the plain build's shim holds %d KiB of anonymous memory, more than 2 MiB", kib)
			} else {
				t.Logf("the plain build's shim holds %d KiB of anonymous memory", kib)
			}
		})
	}
	if got := installedShims(home); len(got) != 0 {
		t.Errorf("home/bin holds %v", got)
	}
	s.stop()
	if n := strings.Count(s.log.String(), "carries no small shim"); n != 1 {
		t.Errorf("the log says %d times that there is no small shim:\n%s", n, s.log)
	}
}

// daemonOnly are packages a plain berth links for the daemon or the CLI
// whose initialisation the programs it runs beside each agent (`berth
// shim-local`, `berth agent-exec`) must never run: each leaves tables in
// every such process's heap (or, for net, makes it wait for them).
var daemonOnly = []string{
	"github.com/distribution/reference",
	"github.com/opencontainers/go-digest",
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"github.com/prometheus/procfs",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/google/jsonschema-go/jsonschema",
	"github.com/spf13/cobra",
	"modernc.org/sqlite",
	"regexp",
	"net",
}

// inits runs berth with args under Go's trace of package initialisation
// and returns the packages it initialised; the command must succeed.
func inits(t *testing.T, berthBin string, args ...string) map[string]bool {
	t.Helper()
	cmd := exec.Command(berthBin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	got := map[string]bool{}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			got[f[1]] = true
		}
	}
	return got
}

// skipsDaemonLibraries runs berth with args under Go's trace of package
// initialisation and fails t for each of the daemon's libraries it
// initialises.
func skipsDaemonLibraries(t *testing.T, berthBin string, args ...string) {
	t.Helper()
	got := inits(t, berthBin, args...)
	if !got["os"] {
		t.Fatalf("the trace of berth %q lists no os: %v", args, got)
	}
	for _, p := range daemonOnly {
		if got[p] {
			t.Errorf("berth %q initialises %s (something it imports now waits for it)", args, p)
		}
	}
}

// `berth shim-local`, `berth agent-exec` (as the daemon writes it) and
// `berth mcp` start from an init function before the daemon's libraries
// are initialised (cmd/berth/internal/childentry): Go's trace of package
// initialisation lists none of them, where `berth --version`, the same
// program, lists them all, and so does an agent-exec the entry leaves to
// the command tree.
func TestChildRolesSkipTheDaemonsLibraries(t *testing.T) {
	plain := plainBerth(t)
	// berth mcp with its environment and stdin empty: it ends at once.
	t.Setenv(berth.ToolsSocketEnv, "/nonexistent")
	t.Setenv(berth.ToolsTokenEnv, "t")
	full := inits(t, plain, "--version")
	for _, p := range daemonOnly {
		if !full[p] {
			t.Fatalf("berth --version does not initialise %s: the trace says nothing (%d packages)", p, len(full))
		}
	}
	for _, args := range [][]string{
		// With stdin empty the shim has no job and ends at once.
		{childentry.ShimRole, "--options", "{}"},
		{childentry.RelayRole, "--gateway-listen", "", "--gateway-socket", "", "--", "true"},
		{childentry.RelayRole, "--gateway-listen=", "--gateway-socket=", "--egress-listen", "127.0.0.1:0", "--egress-socket", "/nonexistent", "--", "true"},
		{childentry.MCPRole},
	} {
		skipsDaemonLibraries(t, plain, args...)
	}
	// A form the entry does not take still runs, through the tree.
	if got := inits(t, plain, childentry.RelayRole, "true"); !got["github.com/spf13/cobra"] {
		t.Errorf("berth agent-exec true did not go through the command tree")
	}
}

// The relay an agent in an isolating sandbox runs under, one per session
// with a model gateway or an allow list, holds at most 2 MiB of anonymous
// memory (a berth agent-exec with everything initialised held 3.6 MiB).
func TestTheRelayIsSmall(t *testing.T) {
	plain := plainBerth(t)
	cmd := exec.Command(plain, childentry.RelayRole, "--gateway-listen", "127.0.0.1:0", "--gateway-socket", "/nonexistent",
		"--egress-listen", "127.0.0.1:0", "--egress-socket", "/nonexistent", "--", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// Its child is the agent: once that runs, the relay is set up.
	waitFor(t, 10*time.Second, "the relay's agent to start", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		return len(strings.TrimSpace(string(b))) > 0
	})
	if kib := rssAnonKiB(t, cmd.Process.Pid); kib > 2048 {
		t.Errorf("berth agent-exec holds %d KiB of anonymous memory, more than 2 MiB", kib)
	} else {
		t.Logf("berth agent-exec holds %d KiB of anonymous memory", kib)
	}
}

// `berth mcp`, which every agent that starts MCP servers runs for each
// session, holds at most 2 MiB of anonymous memory once it relays (it was
// the whole berth program, the MCP server in it: 4.1 MiB).
func TestTheMCPRelayIsSmall(t *testing.T) {
	plain := plainBerth(t)
	sock := filepath.Join(testenv.ShortTempDir(t, "mcp"), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A daemon of one answer: the upgrade, then initialize's.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for line, err := br.ReadString('\n'); err == nil && line != "\r\n"; line, err = br.ReadString('\n') {
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: berth-mcp\r\n\r\n")
		if _, err := br.ReadString('\n'); err == nil {
			_, _ = io.WriteString(c, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
		}
		_, _ = io.Copy(io.Discard, br)
	}()
	cmd := exec.Command(plain, childentry.MCPRole)
	cmd.Env = append(os.Environ(), berth.ToolsSocketEnv+"="+sock, berth.ToolsTokenEnv+"=t")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = in.Close()
		_ = cmd.Wait()
	}()
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	answer, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(answer, `"result"`) {
		t.Fatalf("berth mcp relayed %q, %v", answer, err)
	}
	if kib := rssAnonKiB(t, cmd.Process.Pid); kib > 2048 {
		t.Errorf("berth mcp holds %d KiB of anonymous memory, more than 2 MiB", kib)
	} else {
		t.Logf("berth mcp holds %d KiB of anonymous memory", kib)
	}
}

// rssAnonKiB is the anonymous memory process pid holds, in KiB.
func rssAnonKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("process %d: no RssAnon", pid)
	return 0
}

// What is found at the small shim's path in place of it (a tampered
// file, a symlink to a program elsewhere) is replaced at start, never run.
func TestATamperedShimIsReplacedNotRun(t *testing.T) {
	for name, plant := range map[string]func(path, script string) error{
		"tampered file": func(path, script string) error { return os.WriteFile(path, []byte(script), 0o700) },
		"symlink": func(path, script string) error {
			elsewhere := filepath.Join(filepath.Dir(filepath.Dir(path)), "elsewhere")
			if err := os.WriteFile(elsewhere, []byte(script), 0o700); err != nil {
				return err
			}
			return os.Symlink(elsewhere, path)
		},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			s := startServer(t, home)
			// The shim is written once the probes are over, which health
			// (asked until it probes no more) says.
			s.health(t)
			s.stop()
			installed := installedShims(home)
			if len(installed) != 1 {
				t.Fatalf("home/bin holds %v", installed)
			}
			path := installed[0]
			marker := filepath.Join(t.TempDir(), "ran")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := plant(path, "#!/bin/sh\ntouch "+marker+"\nexec sleep 600\n"); err != nil {
				t.Fatal(err)
			}

			// The shim is in place before the first one runs (the daemon
			// writes it once its sandbox probes are over, and a shim's
			// start waits for the write).
			s = startServer(t, home)
			sess := s.echoSession(t, berth.SandboxHost)
			fi, err := os.Lstat(path)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v %v", path, fi, err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, smallShimBytes(t)) {
				t.Fatal("the planted program was left in place")
			}
			if exe := exeOf(t, sessionShim(t, home, sess.ID)); exe != path {
				t.Fatalf("the shim runs %s, want %s", exe, path)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the planted program ran")
			}
		})
	}
}
