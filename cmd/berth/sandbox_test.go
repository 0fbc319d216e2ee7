package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
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
	var health berth.Health
	s.api("GET", "/v1/health", nil, &health)
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap, berth.SandboxDocker} {
		t.Run(provider, func(t *testing.T) {
			if !strings.Contains(strings.Join(health.Sandboxes, ","), provider) {
				if os.Getenv("BERTH_REQUIRE_INTEGRATION") == "1" {
					t.Fatalf("sandbox %s is not available (health lists %v)", provider, health.Sandboxes)
				}
				t.Skipf("sandbox %s is not available here (health lists %v)", provider, health.Sandboxes)
			}
			var sess berth.Session
			if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": provider}, &sess); st != 201 || sess.State != berth.StateActive {
				t.Fatalf("create = %d %+v (%v)\n%s", st, sess.State, sess.Failure, s.log)
			}
			path := "/v1/sessions/" + sess.ID
			turn := func(text string) berth.TurnResult {
				var r berth.TurnResult
				if st, err := s.api("POST", path+"/prompts?wait=true", map[string]string{"text": text}, &r); st != 200 {
					t.Fatalf("%q = %d %v", text, st, err)
				}
				return r
			}
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
			var started berth.PromptResult
			s.api("POST", path+"/prompts", map[string]string{"text": "sleep 60000"}, &started)
			time.Sleep(300 * time.Millisecond)
			t0 := time.Now()
			if st, _ := s.api("POST", path+"/cancel", nil, nil); st != 202 {
				t.Fatalf("cancel = %d", st)
			}
			var r berth.TurnResult
			s.api("POST", path+"/prompts?wait=true", map[string]string{"text": "echo after"}, &r)
			if r.Text != "after" || time.Since(t0) > 5*time.Second {
				t.Fatalf("after cancel: %+v in %s", r, time.Since(t0))
			}
			var stopped berth.Session
			if st, _ := s.api("POST", path+"/stop", nil, &stopped); st != 200 || stopped.State != berth.StateStopped || stopped.StopReason != berth.StopUserRequested {
				t.Fatalf("stop = %d %+v", st, stopped)
			}
		})
	}
}
