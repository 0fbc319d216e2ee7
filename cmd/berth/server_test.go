package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/apitest"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/shim"
)

// The daemon the end-to-end tests run: a `berth serve` child process on a
// home of its own, and what the tests ask of it.

// cleanEnv is the environment for berth child processes: no BERTH_*
// settings leak in from the test runner.
func cleanEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BERTH_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "BERTH_HOME="+home), extra...)
}

// server is a `berth serve` child process.
type server struct {
	t    testing.TB
	home string
	addr string
	cmd  *exec.Cmd
	log  *testenv.Buffer
}

// freeAddr returns a free loopback address (testenv.FreeAddr).
func freeAddr(t testing.TB) string { return testenv.FreeAddr(t) }

// startServer runs berth serve on a free port and waits for health.
func startServer(t testing.TB, home string, args ...string) *server {
	t.Helper()
	return startServerEnv(t, home, nil, args...)
}

// startServerEnv is startServer with extra environment ("K=V").
func startServerEnv(t testing.TB, home string, env []string, args ...string) *server {
	t.Helper()
	return startServerFree(t, bin, home, env, args...)
}

// startServerAddr is startServerEnv on a given address.
func startServerAddr(t testing.TB, home, addr string, env []string, args ...string) *server {
	t.Helper()
	return startServerBin(t, bin, home, addr, env, args...)
}

// startServerFree runs berthBin's daemon on a free port. A port someone
// took between its pick and the daemon's listen is picked again.
func startServerFree(t testing.TB, berthBin, home string, env []string, args ...string) *server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s, taken := launchServer(t, berthBin, home, freeAddr(t), env, args...)
		if !taken {
			return s
		}
		if attempt == 5 {
			t.Fatalf("no port the daemon could listen on: %s", s.log)
		}
		t.Logf("the daemon could not listen on %s; another port", s.addr)
	}
}

// startServerBin is startServerAddr running the berth binary berthBin.
func startServerBin(t testing.TB, berthBin, home, addr string, env []string, args ...string) *server {
	t.Helper()
	s, taken := launchServer(t, berthBin, home, addr, env, args...)
	if taken {
		t.Fatalf("daemon could not listen on %s: %s", addr, s.log)
	}
	return s
}

// launchServer starts berthBin's daemon on addr and waits for its health.
// taken reports a daemon that exited for it could not listen on addr.
func launchServer(t testing.TB, berthBin, home, addr string, env []string, args ...string) (s *server, taken bool) {
	t.Helper()
	s = &server{t: t, home: home, addr: addr, log: &testenv.Buffer{}}
	s.cmd = exec.Command(berthBin, append([]string{"serve", "--home", home, "--addr", s.addr}, args...)...)
	s.cmd.Env = cleanEnv(home, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if strings.Contains(s.log.String(), "cannot listen on "+addr) {
			_ = s.cmd.Wait()
			return s, true
		}
		// Until the daemon answers, whatever else holds the port is not
		// held to the API's document.
		if s.healthy() {
			t.Cleanup(s.stop)
			// Every answer of the daemon's own is.
			if st, err := s.api("GET", "/v1/health", nil, nil); st != 200 {
				t.Fatalf("daemon not healthy: %d %v: %s", st, err, s.log)
			}
			return s, false
		}
		if time.Now().After(deadline) {
			t.Cleanup(s.stop)
			t.Fatalf("daemon not healthy: %s", s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// healthy reports whether a berth daemon answers GET /v1/health on the
// server's address.
func (s *server) healthy() bool {
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/v1/health", nil)
	s.authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h berth.Health
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Status != ""
}

// stop sends SIGTERM and waits; anything left in the group is killed.
// The agents berth serve leaves running in their shims are stopped too.
func (s *server) stop() {
	defer stopShims(s.t, s.home)
	if s.cmd.ProcessState != nil {
		return
	}
	if exited, _ := s.terminate(20 * time.Second); !exited {
		s.t.Errorf("daemon did not stop on SIGTERM: %s", s.log)
	}
}

// terminate sends SIGTERM to the daemon and waits up to within for it to
// exit, and returns how it did. One that did not (exited false) is killed
// with its process group, and reaped.
func (s *server) terminate(within time.Duration) (exited bool, err error) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(within):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		return false, <-done
	}
}

// shimsOf returns the pids of the shims of a berth home (serving a
// session or spare), found by the run directory in their environment.
func shimsOf(home string) []int {
	return procfs.WithEnv(shim.EnvRun + "=" + filepath.Join(home, "run"))
}

// stopShims stops the shims a test daemon left (each stops its agent on
// SIGTERM), then kills what is left of them.
func stopShims(t testing.TB, home string) {
	// A shim gone since the scan may have left its pid to another process.
	run := shim.EnvRun + "=" + filepath.Join(home, "run")
	for _, pid := range shimsOf(home) {
		procfs.SignalIfEnv(pid, run, syscall.SIGTERM, false)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(shimsOf(home)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range shimsOf(home) {
		t.Logf("shim %d did not stop on SIGTERM; killing it", pid)
		procfs.KillIfEnv(pid, run, false)
	}
}

// api makes one request and decodes the JSON answer into out.
func (s *server) api(method, path string, body any, out any) (int, error) {
	req := s.request(method, path, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	// Every answer of a documented route matches the OpenAPI document.
	apitest.Check(s.t, req, resp.StatusCode, resp.Header, raw)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// request is a request to the daemon with its token. A string body is
// sent as it is (none when empty), any other as JSON, nil as none.
func (s *server) request(method, path string, body any) *http.Request {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		if b != "" {
			rd = strings.NewReader(b)
		}
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, "http://"+s.addr+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	s.authorize(req)
	return req
}

// authorize adds the token the daemon keeps in its home to req.
func (s *server) authorize(req *http.Request) {
	if tok := readTokenFile(s.home); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}

// errorBody is an API error answer.
type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// create creates a session of body, whose agent is demo and sandbox host
// unless it names others, and fails the test unless the daemon answers 201.
func (s *server) create(t testing.TB, body map[string]any) berth.Session {
	t.Helper()
	req := map[string]any{"agent": "demo", "sandbox": berth.SandboxHost}
	maps.Copy(req, body)
	var sess berth.Session
	if st, err := s.api("POST", "/v1/sessions", req, &sess); st != 201 || err != nil {
		t.Fatalf("create %v = %d %v\n%s", req, st, err, s.log)
	}
	return sess
}

// turn runs one prompt of session id to its end (?wait=true) and fails the
// test unless the daemon answers 200.
func (s *server) turn(t testing.TB, id, text string) berth.TurnResult {
	t.Helper()
	var r berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]string{"text": text}, &r); st != 200 {
		t.Fatalf("%q = %d %v", text, st, err)
	}
	return r
}

// writeConfig writes the daemon's config.toml in home.
func writeConfig(t testing.TB, home, toml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// kill9 kills the daemon with SIGKILL (its process only) and reaps it.
func (s *server) kill9() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// allEvents pages through a session's whole log.
func (s *server) allEvents(t *testing.T, id string) []berth.Event {
	t.Helper()
	var out []berth.Event
	after := int64(0)
	for {
		var page struct {
			Events []berth.Event `json:"events"`
		}
		if st, err := s.api("GET", "/v1/sessions/"+id+"/events?limit=1000&after="+strconv.FormatInt(after, 10), nil, &page); st != 200 || err != nil {
			t.Fatalf("events after %d: %d %v", after, st, err)
		}
		out = append(out, page.Events...)
		if len(page.Events) < 1000 {
			return out
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

// health reads /v1/health once the sandbox probes have answered.
func (s *server) health(t *testing.T) berth.Health {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var h berth.Health
		if st, err := s.api("GET", "/v1/health", nil, &h); st != 200 {
			t.Fatalf("health = %d %v", st, err)
		}
		// Health does not wait for the sandbox probes: this does.
		if len(h.Probing) == 0 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still probes %v after a minute", h.Probing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// session reads one session from a node.
func (s *server) session(t *testing.T, id string) berth.Session {
	t.Helper()
	var sess berth.Session
	if st, err := s.api("GET", "/v1/sessions/"+id, nil, &sess); st != 200 || err != nil {
		t.Fatalf("GET session %s: %d %v\n%s", id, st, err, s.log)
	}
	return sess
}

// cliEnv is the environment of a berth CLI that talks to s by its
// address and token (BERTH_ADDR, BERTH_TOKEN), with extra ("K=V").
func (s *server) cliEnv(extra ...string) []string {
	return cleanEnv(s.home, append([]string{"BERTH_ADDR=" + s.addr, "BERTH_TOKEN=" + readTokenFile(s.home)}, extra...)...)
}

// run runs the berth CLI against s and returns its output (its stdout,
// then its stderr) and its exit code.
func (s *server) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", s.addr}, args...)...)
	cmd.Env = cleanEnv(s.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String() + stderr.String(), cmd.ProcessState.ExitCode()
}

// cli runs the berth CLI against s, expecting it to succeed, and returns
// its output.
func (s *server) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, code := s.run(t, args...)
	if code != 0 {
		t.Fatalf("berth %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// cliFails runs the berth CLI against s, expecting it to fail, and
// returns its exit code and output.
func (s *server) cliFails(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, code := s.run(t, args...)
	if code == 0 {
		t.Fatalf("berth %s did not fail\n%s", strings.Join(args, " "), out)
	}
	return code, out
}

// waitSession polls a session until cond holds.
func (s *server) waitSession(t *testing.T, id, what string, cond func(berth.Session) bool) berth.Session {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got berth.Session
		if st, err := s.api("GET", "/v1/sessions/"+id, nil, &got); st == 200 && err == nil && cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v\n%s", what, got, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog polls a session's log until cond holds.
func (s *server) waitLog(t *testing.T, id, what string, cond func([]berth.Event) bool) []berth.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := s.allEvents(t, id)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; turns %v", what, turnStarts(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// busySession creates a demo session running a long turn.
func (s *server) busySession(t *testing.T, extra map[string]any) berth.Session {
	t.Helper()
	return s.busySessionWith(t, extra, "sleep 60000")
}

// busySessionWith creates a demo session running prompt; the session's
// CurrentTurnID is the prompt's turn.
func (s *server) busySessionWith(t *testing.T, extra map[string]any, prompt string) berth.Session {
	t.Helper()
	body := map[string]any{"agent": "demo", "sandbox": "host"}
	for k, v := range extra {
		body[k] = v
	}
	var sess berth.Session
	if st, err := s.api("POST", "/v1/sessions", body, &sess); st != 201 {
		t.Fatalf("create = %d %v", st, err)
	}
	var r berth.PromptResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]string{"text": prompt}, &r); st != 202 || r.Status != "started" {
		t.Fatalf("busy prompt = %d %+v", st, r)
	}
	sess.CurrentTurnID = r.TurnID
	return sess
}

// eachSSE reads the Server-Sent Events of r, calling each with an event's
// type, id and data, until each returns false or r ends.
func eachSSE(r io.Reader, each func(typ, id, data string) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var typ, id string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			typ = v
		} else if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok && !each(typ, id, v) {
			return nil
		}
	}
	return sc.Err()
}

// openSSE opens the SSE stream at path of s (with its query) under ctx,
// from after the event lastID when it is not "". An answer other than 200
// is an error.
func (s *server) openSSE(ctx context.Context, path, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+path, nil)
	if err != nil {
		return nil, err
	}
	s.authorize(req)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return resp, nil
}

// followSSE opens the SSE stream at path of s and reads it with each
// (eachSSE) on a goroutine of its own, which stop (or the test's end)
// stops and waits for; end, when not nil, is told how the stream ended.
func (s *server) followSSE(t *testing.T, path string, each func(typ, id, data string) bool, end func(error)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := s.openSSE(ctx, path, "")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	go func() {
		defer close(done)
		defer resp.Body.Close()
		err := eachSSE(resp.Body, each)
		if end != nil {
			end(err)
		}
	}()
	return stop
}
