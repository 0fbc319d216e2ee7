package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
)

// providerEnv is the daemon environment that reaches the test engine.
func providerEnv() []string {
	if h := os.Getenv("BERTH_TEST_DOCKER_HOST"); h != "" {
		return []string{"BERTH_SANDBOX_DOCKER_HOST=" + h}
	}
	return nil
}

// The demo agent works end to end on every provider: echo, write then
// read, run, cancel, stop.
func TestDemoOnEveryProvider(t *testing.T) {
	s := startServerEnv(t, t.TempDir(), providerEnv())
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			var sess berth.Session
			if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": provider}, &sess); st != 201 || sess.State != berth.StateActive {
				t.Fatalf("create = %d %+v (%v)\n%s", st, sess.State, sess.Failure, s.log)
			}
			path := "/v1/sessions/" + sess.ID
			turn := func(text string) berth.TurnResult { t.Helper(); return s.turn(t, sess.ID, text) }
			if r := turn("echo hello"); r.Text != "hello" {
				t.Fatalf("echo: %+v", r)
			}
			turn("write notes.txt kept")
			if r := turn("read notes.txt"); r.Text != "kept" {
				t.Fatalf("read: %+v", r)
			}
			if b, err := os.ReadFile(sess.Workspace + "/notes.txt"); err != nil || string(b) != "kept" {
				t.Fatalf("the file on the host: %q %v", b, err)
			}
			if r := turn("run echo from-$((20+22))"); !strings.Contains(r.Text, "from-42") {
				t.Fatalf("run: %+v", r)
			}
			// Cancel once the agent is in its minute-long sleep (it ticks):
			// the turn then ends cancelled, not by running out.
			var started berth.PromptResult
			s.api("POST", path+"/prompts", map[string]string{"text": "sleep 60000"}, &started)
			s.waitLog(t, sess.ID, "the sleep to tick", func(evs []berth.Event) bool { return ticksOf(evs, started.TurnID) > 0 })
			if st, _ := s.api("POST", path+"/cancel", nil, nil); st != 202 {
				t.Fatalf("cancel = %d", st)
			}
			var r berth.TurnResult
			s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo after"}, &r)
			if r.Text != "after" {
				t.Fatalf("after cancel: %+v", r)
			}
			if reason, _ := turnEndedOf(s.allEvents(t, sess.ID), started.TurnID); reason != berth.TurnCancelled {
				t.Fatalf("the sleeping turn ended %q, want cancelled", reason)
			}
			var stopped berth.Session
			if st, _ := s.api("POST", path+"/stop", nil, &stopped); st != 200 || stopped.State != berth.StateStopped || stopped.StopReason != berth.StopUserRequested {
				t.Fatalf("stop = %d %+v", st, stopped)
			}
		})
	}
}

// From inside a session — through exec and through the demo agent's run —
// an isolating sandbox holds: no host secrets, no daemon home, no daemon
// environment, no writes outside the workspace, no loopback with the
// network off, no other session's workspace, nothing left after a stop.
func TestSessionsCannotGetOut(t *testing.T) {
	const secret = "BERTH_TEST_MARKER_SECRET=do-not-leak-3f9a"
	home := t.TempDir()
	s := startServerEnv(t, home, append(providerEnv(), secret))
	port := s.addr[strings.LastIndex(s.addr, ":")+1:]
	outside := t.TempDir()
	for _, provider := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			create := func() berth.Session {
				var sess berth.Session
				if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": provider}, &sess); st != 201 || sess.State != berth.StateActive {
					t.Fatalf("create = %d %+v", st, sess.Failure)
				}
				return sess
			}
			victim, sess := create(), create()
			if err := os.WriteFile(victim.Workspace+"/secret.txt", []byte("victim"), 0o644); err != nil {
				t.Fatal(err)
			}
			sh := func(script string) berth.ExecResult {
				var r berth.ExecResult
				if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"command": []string{"sh", "-c", script}, "timeout_seconds": 10}, &r); st != 200 {
					t.Fatalf("exec %q = %d %v", script, st, err)
				}
				return r
			}
			for _, c := range []struct{ what, script string }{
				{"/etc/shadow", "cat /etc/shadow"},
				{"the daemon's database", "cat " + home + "/berth.db"},
				{"the daemon's socket", "ls " + home + "/berth.sock"},
				{"another session's workspace", "cat " + victim.Workspace + "/secret.txt"},
				{"a write outside the workspace", "echo x > " + outside + "/escaped"},
				{"the daemon's port", "echo GET / | busybox nc -w 2 127.0.0.1 " + port},
			} {
				if r := sh(c.script); r.ExitCode == 0 {
					t.Errorf("%s: %q succeeded: %+v", c.what, c.script, r)
				}
			}
			if _, err := os.Stat(outside + "/escaped"); err == nil {
				t.Error("a file was written outside the workspace")
			}
			if r := sh("env; cat /proc/1/environ 2>/dev/null"); strings.Contains(r.Stdout, "do-not-leak") {
				t.Errorf("the daemon's environment leaked: %s", r.Stdout)
			}
			// The same through the agent's own tool calls.
			var res berth.TurnResult
			s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "run cat /etc/shadow " + home + "/berth.db; env"}, &res)
			if strings.Contains(res.Text, "root:") || strings.Contains(res.Text, "do-not-leak") || strings.Contains(res.Text, "SQLite") {
				t.Errorf("the agent's run got out: %q", res.Text)
			}
			// A process left running is gone once the session stops.
			sh("(setsid sleep 1000 &) ; sleep 1000 & echo started")
			s.api("POST", "/v1/sessions/"+sess.ID+"/stop", nil, nil)
			s.api("POST", "/v1/sessions/"+victim.ID+"/stop", nil, nil)
			deadline := time.Now().Add(10 * time.Second)
			for {
				left := sessionProcs(sess.ID)
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes of the session remain after its stop: %v", left)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// sessionProcs lists live processes whose environment names a session.
func sessionProcs(id string) []string {
	var out []string
	for _, pid := range agentPIDs(id) {
		if st, err := procfs.ReadStat(pid); err == nil && !st.Live() {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d:%s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}

// A bwrap session with network starts and works as the daemon's user, an
// ordinary user's included (whose slirp4netns could not act on bwrap's
// namespace: every such session ended startup_failed), reaches the
// outside through slirp4netns (a service on the host's own non-loopback
// address, the control), and not the host's loopback: neither the
// daemon's port at 127.0.0.1 nor through 10.0.2.2, slirp's alias of it.
func TestBwrapSessionWithNetwork(t *testing.T) {
	s := startServer(t, t.TempDir())
	s.needSandbox(t, berth.SandboxBwrap)
	var outside string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			outside = ip.IP.String()
			break
		}
	}
	if outside == "" {
		testenv.Missing(t, "a non-loopback IPv4 address", "the host has none: the control needs one")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(outside, "0"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Serve(t, ln, func(c net.Conn) { _, _ = c.Write([]byte("reached-the-outside\n")) })
	var sess berth.Session
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": berth.SandboxBwrap, "network": true}, &sess); st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create = %d %s %+v\n%s", st, sess.State, sess.Failure, s.log)
	}
	var r berth.TurnResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "echo online"}, &r); st != 200 || r.Text != "online" {
		t.Fatalf("a turn = %d %+v", st, r)
	}
	sh := func(script string) berth.ExecResult {
		var r berth.ExecResult
		if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/exec", map[string]any{"command": []string{"sh", "-c", script}, "timeout_seconds": 10}, &r); st != 200 {
			t.Fatalf("exec %q = %d %v", script, st, err)
		}
		return r
	}
	if r := sh("cat /proc/net/dev"); !strings.Contains(r.Stdout, "tap0:") {
		t.Errorf("no tap0 in the sandbox: %+v", r)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if r := sh(fmt.Sprintf("busybox nc -w 3 %s %d", outside, port)); !strings.Contains(r.Stdout, "reached-the-outside") {
		t.Errorf("the host's own address is out of reach: %+v", r)
	}
	daemonPort := s.addr[strings.LastIndex(s.addr, ":")+1:]
	for _, host := range []string{"127.0.0.1", "10.0.2.2"} {
		if r := sh("echo GET / | busybox nc -w 2 " + host + " " + daemonPort); r.ExitCode == 0 || strings.Contains(r.Stdout, "HTTP") {
			t.Errorf("the daemon's port through %s answered: %+v", host, r)
		}
	}
}

// A docker session on an engine this daemon cannot reach is 503 at
// create, with the reason: a socket that is not there, or (for a daemon
// that is not root) one its user may not use, which says how to be let
// in (the socket's group). Nothing is created.
func TestCreateOnAnUnreachableDockerSaysWhy(t *testing.T) {
	sock, refused := unusableEngineSocket(t)
	want := "no such file"
	if refused {
		want = "permission denied (this user may not use the engine's socket: add it to the socket's group"
	}
	s := startServerEnv(t, t.TempDir(), []string{"BERTH_SANDBOX_DOCKER_HOST=unix://" + sock})
	var e json.RawMessage
	st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": berth.SandboxDocker}, &e)
	if st != 503 || !strings.Contains(string(e), "sandbox provider docker is not available: docker: no engine at unix://"+sock) || !strings.Contains(string(e), want) {
		t.Errorf("create on an unreachable engine = %d %s, want 503 saying %q", st, e, want)
	}
	var list struct {
		Sessions []berth.Session `json:"sessions"`
	}
	if s.api("GET", "/v1/sessions?all=true", nil, &list); len(list.Sessions) != 0 {
		t.Errorf("a refused create left %d sessions", len(list.Sessions))
	}
}

// A bwrap session's workspace, written by the agent and by exec inside
// the sandbox (files of the sandbox's owner: the host uid under a root
// daemon, the daemon's own user otherwise), is snapshotted whole, and a
// new bwrap session from that snapshot finds it and may change it.
func TestSnapshotOfABwrapSession(t *testing.T) {
	s := startServer(t, t.TempDir())
	s.needSandbox(t, berth.SandboxBwrap)
	create := func(body map[string]any) berth.Session {
		var sess berth.Session
		body["agent"], body["sandbox"] = "demo", berth.SandboxBwrap
		if st, _ := s.api("POST", "/v1/sessions", body, &sess); st != 201 || sess.State != berth.StateActive {
			t.Fatalf("create = %d %s %+v\n%s", st, sess.State, sess.Failure, s.log)
		}
		return sess
	}
	sh := func(id, script string) berth.ExecResult {
		var r berth.ExecResult
		if st, err := s.api("POST", "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"sh", "-c", script}, "timeout_seconds": 10}, &r); st != 200 {
			t.Fatalf("exec %q = %d %v", script, st, err)
		}
		return r
	}
	src := create(map[string]any{})
	var r berth.TurnResult
	s.api("POST", "/v1/sessions/"+src.ID+"/prompts?wait=true", map[string]string{"text": "write notes.txt kept"}, &r)
	if r := sh(src.ID, "mkdir -p d && echo made-inside > d/inside.txt"); r.ExitCode != 0 {
		t.Fatalf("exec: %+v", r)
	}
	var snap berth.Snapshot
	if st, err := s.api("POST", "/v1/sessions/"+src.ID+"/snapshots", nil, &snap); st != 201 || snap.Files < 2 || snap.Skipped != 0 {
		t.Fatalf("snapshot = %d %+v %v", st, snap, err)
	}
	dst := create(map[string]any{"from_snapshot": snap.ID})
	if r := sh(dst.ID, "cat notes.txt; echo; cat d/inside.txt; echo changed >> d/inside.txt && echo writable"); r.Stdout != "kept\nmade-inside\nwritable\n" {
		t.Errorf("the restored workspace: %+v", r)
	}
}
