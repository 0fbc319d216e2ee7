package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/mcptest"
	"github.com/berth-sh/berth/internal/testenv"
)

// bin is the berth binary built once for the end-to-end tests, carrying
// the small shim built from this tree whether or not `go generate` ran;
// exampleAgent is the acp-go-sdk example agent, a third-party ACP agent;
// binDir holds them.
var bin, exampleAgent, binDir string

// The binaries the tests run can be built ahead, so that a user without
// a Go toolchain or module cache may run the test binary (scripts/test's
// unprivileged pass): the test binary run with buildBinariesEnv=DIR (from
// this package's directory) builds them into DIR and exits; run with
// binariesEnv=DIR it takes them from DIR instead of building.
const (
	buildBinariesEnv = "BERTH_TEST_BUILD_BINARIES"
	binariesEnv      = "BERTH_TEST_BINARIES"
)

// Names of the binaries in binDir.
const (
	berthName        = "berth"
	exampleAgentName = "example-agent"
	smallShimName    = "berth-shim"
	// plainBerthName is berth without the small shim (plainBerth).
	plainBerthName = "berth-plain"
)

func TestMain(m *testing.M) {
	// The test MCP server that sessions' agents start as a stdio server.
	mcptest.MaybeServeStdio()
	if dir := os.Getenv(buildBinariesEnv); dir != "" {
		if err := buildBinaries(dir, true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir := os.Getenv(binariesEnv)
	if dir != "" {
		for _, name := range []string{berthName, exampleAgentName, smallShimName, plainBerthName} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				fmt.Fprintf(os.Stderr, "%s=%s: %v (build them with %s)\n", binariesEnv, dir, err, buildBinariesEnv)
				os.Exit(1)
			}
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "berth-e2e-"); err != nil {
			panic(err)
		}
		if err := buildBinaries(dir, false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	binDir = dir
	bin, exampleAgent = filepath.Join(dir, berthName), filepath.Join(dir, exampleAgentName)
	code := m.Run()
	if os.Getenv(binariesEnv) == "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// buildBinaries builds into dir the small shim as `go generate` builds
// it, berth carrying it, the example agent, and with plain berth without
// the small shim (else built when a test first needs it).
func buildBinaries(dir string, plain bool) error {
	small := filepath.Join(dir, smallShimName)
	if b, err := exec.Command("go", "run", "github.com/berth-sh/berth/internal/genshim", "-o", small).CombinedOutput(); err != nil {
		return fmt.Errorf("build the small shim: %v\n%s", err, b)
	}
	builds := []struct{ out, pkg, overlay string }{
		{filepath.Join(dir, berthName), ".", small},
		{filepath.Join(dir, exampleAgentName), "github.com/coder/acp-go-sdk/example/agent", ""},
	}
	if plain {
		builds = append(builds, struct{ out, pkg, overlay string }{filepath.Join(dir, plainBerthName), ".", "-"})
	}
	for _, b := range builds {
		if err := goBuild(b.out, b.pkg, b.overlay); err != nil {
			return err
		}
	}
	return nil
}

// goBuild builds pkg to out, static. For berth, shim names the small shim
// it embeds with its hash beside it (an -overlay over shimbin/berth-shim
// and its .sha256, whatever `go generate` left there); "-" embeds none.
func goBuild(out, pkg, shim string) error {
	args := []string{"build", "-o", out}
	if shim != "" {
		src, err := filepath.Abs(filepath.Join("shimbin", "berth-shim"))
		if err != nil {
			return err
		}
		replace := map[string]string{src: shim, src + ".sha256": shim + ".sha256"}
		if shim == "-" {
			replace = map[string]string{src: "", src + ".sha256": ""}
		}
		ov, _ := json.Marshal(map[string]map[string]string{"Replace": replace})
		ovFile := out + ".overlay.json"
		if err := os.WriteFile(ovFile, ov, 0o600); err != nil {
			return err
		}
		args = append(args, "-overlay", ovFile)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// shortHome is a home of its own for a daemon under a short path: the
// Unix sockets of its sessions (the berth MCP server's among them) live
// below it, and a path of t.TempDir's, with the test's name in it, can be
// too long for one under a longer TMPDIR.
func shortHome(t testing.TB) string {
	t.Helper()
	home := testenv.ShortTempDir(t, "bh")
	return home
}

func TestRunEchoHelloWithNoDaemon(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(bin, "run", "--agent", "demo", "echo hello")
	cmd.Env = cleanEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("berth run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	if strings.TrimSpace(stdout.String()) != "hello" {
		t.Fatalf("stdout = %q, want hello", stdout.String())
	}
	if !strings.Contains(stderr.String(), "ses_") || !strings.Contains(stderr.String(), "then berth resume ses_") {
		t.Fatalf("run did not say how to reach the session it stopped: %q", stderr.String())
	}
	// The in-process daemon stopped its session and left nothing running.
	assertNoProcessUnder(t, home)

	failing := exec.Command(bin, "run", "--agent", "demo", "crash 2")
	failing.Env = cleanEnv(home)
	if err := failing.Run(); err == nil {
		t.Fatal("berth run of a crashing turn exited 0")
	}
}

// A daemon of another home answering where this home's config says its
// daemon listens is not this home's (this home has no socket): berth run
// starts its own in-process daemon rather than be refused that one's
// token (CONTRACT §5: "on the same home directory").
func TestRunIgnoresAnotherHomesDaemon(t *testing.T) {
	other := startServer(t, t.TempDir())
	home := t.TempDir()
	cfg := fmt.Sprintf("[server]\naddr = %q\n", other.addr)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--agent", "demo", "echo mine")
	cmd.Env = cleanEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("berth run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	if strings.TrimSpace(stdout.String()) != "mine" {
		t.Fatalf("stdout = %q, want mine", stdout.String())
	}
	var list struct {
		Sessions []berth.Session `json:"sessions"`
	}
	if st, err := other.api("GET", "/v1/sessions", nil, &list); st != 200 || len(list.Sessions) != 0 {
		t.Fatalf("the other home's daemon: %d %v, %d sessions", st, err, len(list.Sessions))
	}
}

// assertNoProcessUnder fails if a process mentions dir on its command line
// or has its working directory under it.
func assertNoProcessUnder(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
			if strings.Contains(string(cmdline), dir) || strings.HasPrefix(cwd, dir) {
				left = append(left, strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left under %s: %q", dir, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(bin, "serve", "--home", home, "--addr", "0.0.0.0:0")
	cmd.Env = cleanEnv(home)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on 0.0.0.0 without a token: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "token") {
		t.Fatalf("message does not say a token is needed: %s", out)
	}
	bad := exec.Command(bin, "serve", "--home", home, "--store", "mysql://x")
	bad.Env = cleanEnv(home)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "store") {
		t.Fatalf("serve with a bad store url: %v\n%s", err, out)
	}
}

func TestHTTPContract(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	if sess.State != berth.StateActive || sess.Badge != berth.BadgeIdle || sess.ACP.ProtocolVersion != 1 {
		t.Fatalf("created session = %+v", sess)
	}
	var res berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "echo hi there"}, &res); st != 200 || err != nil {
		t.Fatalf("prompt wait = %d %v", st, err)
	}
	if res.TurnID == "" || res.StopReason != "end_turn" || res.Text != "hi there" {
		t.Fatalf("prompt wait = %+v", res)
	}
	var page struct {
		Events    []berth.Event `json:"events"`
		NextAfter int64         `json:"next_after"`
	}
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID+"/events?after=0&limit=1000", nil, &page); st != 200 {
		t.Fatalf("events = %d", st)
	}
	want := []string{"session_created", "session_started", "commands_update", "turn_started", "checkpoint_created", "agent_message", "turn_ended"}
	for i, ev := range page.Events {
		if ev.Seq != int64(i+1) || i >= len(want) || ev.Type != want[i] {
			t.Fatalf("log = %+v", page.Events)
		}
		if i >= 3 && ev.TurnID != res.TurnID {
			t.Fatalf("turn event without its turn id: %+v", ev)
		}
	}

	tmpFile := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(tmpFile, nil, 0o600)
	bad := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"GET", "/v1/sessions/ses_nope", nil, 404, "not_found"},
		{"POST", "/v1/sessions/ses_nope/prompts", map[string]any{"text": "x"}, 404, "not_found"},
		{"POST", "/v1/sessions", map[string]any{"agent": "demo", "bogus": 1}, 400, "invalid_argument"},
		{"POST", "/v1/sessions", `{"agent": "demo"`, 400, "invalid_argument"},
		{"POST", "/v1/sessions", map[string]any{"agent": "no-such-agent"}, 400, "invalid_argument"},
		{"POST", "/v1/sessions", map[string]any{"agent": "demo", "workspace": "/no/such/dir"}, 400, "invalid_argument"},
		{"POST", "/v1/sessions", map[string]any{"agent": "demo", "workspace": tmpFile}, 400, "invalid_argument"},
		{"POST", "/v1/sessions/" + sess.ID + "/prompts", map[string]any{"text": "  "}, 400, "invalid_argument"},
		{"POST", "/v1/sessions/" + sess.ID + "/prompts", map[string]any{"text": "x", "extra": true}, 400, "invalid_argument"},
		{"POST", "/v1/sessions/" + sess.ID + "/cancel", nil, 409, "conflict"},
	}
	for _, b := range bad {
		var eb errorBody
		st, err := s.api(b.method, b.path, b.body, &eb)
		if err != nil || st != b.status || eb.Error.Code != b.code || eb.Error.Message == "" {
			t.Errorf("%s %s %v = %d %+v %v, want %d %s", b.method, b.path, b.body, st, eb, err, b.status, b.code)
		}
	}
	var list berth.SessionPage
	s.api("GET", "/v1/sessions", nil, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("%d sessions after bad requests, want 1", len(list.Sessions))
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/events?after=0&limit=1000", nil, &page)
	if len(page.Events) != len(want) {
		t.Fatalf("log grew to %d events after bad requests", len(page.Events))
	}
	fi, err := os.Stat(filepath.Join(s.home, "berth.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket = %v %v", fi, err)
	}
	var stopped berth.Session
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/stop", nil, &stopped); st != 200 || stopped.State != berth.StateStopped || stopped.StopReason != berth.StopUserRequested {
		t.Fatalf("stop = %d %+v", st, stopped)
	}
}

// readSSE reads events from an SSE stream until stop says so.
func readSSE(t *testing.T, s *server, path string, lastID int64, stop func(berth.Event) bool) []berth.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := s.openSSE(ctx, path, strconv.FormatInt(lastID, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []berth.Event
	_ = eachSSE(resp.Body, func(_, id, data string) bool {
		var ev berth.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if strconv.FormatInt(ev.Seq, 10) != id {
			t.Fatalf("SSE id %s for event seq %d", id, ev.Seq)
		}
		out = append(out, ev)
		return !stop(ev)
	})
	return out
}

func TestSSEReconnectDuringFloodHasNoGapOrDuplicate(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	var r berth.PromptResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "flood 30000 64"}, &r); st != 202 {
		t.Fatalf("prompt = %d", st)
	}
	path := "/v1/sessions/" + sess.ID + "/events/stream"
	var all []berth.Event
	last := int64(0)
	// Three short connections mid-flood, then one to the end of the turn.
	for i := 0; i < 3; i++ {
		n := 0
		got := readSSE(t, s, path, last, func(ev berth.Event) bool { n++; return n == 2000 || ev.Type == berth.EventTurnEnded })
		all = append(all, got...)
		last = all[len(all)-1].Seq
	}
	all = append(all, readSSE(t, s, path, last, func(ev berth.Event) bool { return ev.Type == berth.EventTurnEnded })...)
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap or duplicate across reconnects", i, ev.Seq)
		}
	}
	if n := len(all); n < 30000 {
		t.Fatalf("only %d events", n)
	}
}

func TestThirdPartyAgentFromConfig(t *testing.T) {
	home := t.TempDir()
	conf := fmt.Sprintf("[[agents]]\nname = \"example\"\ncommand = %q\ndescription = \"acp-go-sdk example agent\"\n", exampleAgent)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	var agents struct {
		Agents []berth.AgentInfo `json:"agents"`
	}
	s.api("GET", "/v1/agents", nil, &agents)
	found := false
	for _, a := range agents.Agents {
		found = found || (a.Name == "example" && a.Available)
	}
	if !found {
		t.Fatalf("agents = %+v", agents)
	}
	var sess berth.Session
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "example", "sandbox": "host", "permission_mode": "approve-all"}, &sess); st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create example session = %d %+v", st, sess)
	}
	var res berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "hello"}, &res); st != 200 || err != nil {
		t.Fatalf("prompt = %d %v", st, err)
	}
	if res.StopReason != "end_turn" || !strings.Contains(res.Text, "Example Agent") {
		t.Fatalf("turn = %+v", res)
	}
	var page struct {
		Events []berth.Event `json:"events"`
	}
	s.api("GET", "/v1/sessions/"+sess.ID+"/events?type=permission_resolved", nil, &page)
	if len(page.Events) != 1 {
		t.Fatalf("permission events = %+v", page.Events)
	}
}

// With [server] token set, the CLI on the same home finds the token in the
// config; a wrong token is refused.
func TestCLIUsesTheConfigToken(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[server]\ntoken = \"s3cret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	srv := exec.Command(bin, "serve", "--home", home, "--addr", addr)
	srv.Env = cleanEnv(home)
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	// Over TCP (the socket needs no token, and the CLI would prefer it).
	cli := func(env ...string) (string, error) {
		c := exec.Command(bin, "--addr", addr, "ls")
		c.Env = cleanEnv(home, env...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := cli()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("berth ls with the config's token: %v %s\n%s", err, out, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := cli("BERTH_TOKEN=wrong")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "unauthenticated") && !strings.Contains(strings.ToLower(out), "token") {
		t.Fatalf("berth ls with a wrong token: %v %q", err, out)
	}
}

// prompt --wait exits by how the turn ended, with -o json too.
func TestPromptWaitExitCodeFollowsTheTurn(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	for _, c := range []struct {
		text string
		code int
	}{{"echo fine", 0}, {"crash 2", 1}} {
		cmd := exec.Command(bin, "--addr", s.addr, "-o", "json", "prompt", sess.ID, "--wait", c.text)
		cmd.Env = cleanEnv(s.home)
		out, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		var r berth.TurnResult
		if code != c.code || json.Unmarshal(out, &r) != nil || r.TurnID == "" {
			t.Fatalf("prompt --wait -o json %q: exit %d (want %d), output %q", c.text, code, c.code, out)
		}
	}
}
