package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// berth prompt --wait says on stderr what the turn waits on (a permission
// question, with the command that answers it), and --timeout gives up
// waiting with exit 1 while the turn goes on.
func TestPromptWaitSaysWhatItWaitsOn(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, map[string]any{"permission_mode": "ask"})
	env := s.cliEnv()

	cmd := exec.Command(bin, "prompt", sess.ID, "--wait", "ask delete everything")
	cmd.Env = env
	var stdout, stderr testenv.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "waiting for permission perm_") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said the turn waits for a permission: %q", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	line := stderr.String()
	perm := line[strings.Index(line, "perm_"):]
	perm = perm[:strings.IndexAny(perm, " (")]
	if !strings.Contains(line, "berth approve "+sess.ID+" "+perm) {
		t.Errorf("the waiting line does not say how to answer: %q", line)
	}
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/permissions/"+perm, map[string]string{"decision": "allow_once"}, nil); st != 200 {
		t.Fatalf("approve = %d %v", st, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("prompt --wait: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "[end_turn]") {
		t.Errorf("stdout %q", stdout.String())
	}

	// --timeout: exit 1, saying the turn goes on; and it does.
	cmd = exec.Command(bin, "prompt", sess.ID, "--wait", "--timeout", "1s", "sleep 60000")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out.String(), "did not end within 1s; it goes on") {
		t.Errorf("--timeout: exit %d, %q", code, out.String())
	}
	var got berth.Session
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID, nil, &got); st != 200 || got.Badge != berth.BadgeRunning {
		t.Errorf("after the timeout: %d %s, want the turn still running", st, got.Badge)
	}
}
