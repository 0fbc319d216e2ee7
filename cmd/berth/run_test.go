package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// On a running daemon, berth run leaves a live session and says how to
// reach it; with --rm it deletes the session once the turn ends.
func TestRunOnADaemonSaysWhatItLeftAndRmDeletes(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	run := func(args ...string) (string, string) {
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Env = s.cliEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("berth run %v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	idOf := func(stderr string) string {
		id := regexp.MustCompile(`ses_[0-9a-z]+`).FindString(stderr)
		if id == "" {
			t.Fatalf("no session id in %q", stderr)
		}
		return id
	}

	out, stderr := run("echo kept")
	id := idOf(stderr)
	var got berth.Session
	if st, _ := s.api("GET", "/v1/sessions/"+id, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Fatalf("after run: %d %s", st, got.State)
	}
	if strings.TrimSpace(out) != "kept" || !strings.Contains(stderr, "stays live on the daemon: berth prompt "+id) {
		t.Errorf("stdout %q, stderr %q", out, stderr)
	}

	out, stderr = run("--rm", "echo gone")
	id = idOf(stderr)
	if st, _ := s.api("GET", "/v1/sessions/"+id, nil, nil); st != 404 {
		t.Errorf("after run --rm the session answers %d, want 404", st)
	}
	if strings.TrimSpace(out) != "gone" || !strings.Contains(stderr, "session "+id+" deleted (--rm)") {
		t.Errorf("stdout %q, stderr %q", out, stderr)
	}
}

// berth run of a turn that fails says what prompt --wait says: the
// turn's error, its code and message (agent_exited: the agent exited …),
// not only "the turn ended with error".
func TestRunSaysHowTheTurnFailed(t *testing.T) {
	s := startServer(t, t.TempDir())
	cmd := exec.Command(bin, "run", "crash 3")
	cmd.Env = s.cliEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("berth run \"crash 3\": %v, want exit 1\n%s", err, stderr.String())
	}
	sess := s.create(t, nil)
	code, wait := s.cliFails(t, "prompt", sess.ID, "--wait", "crash 3")
	waitLine := regexp.MustCompile(`berth: the turn ended with an error: .*`).FindString(wait)
	if code != 1 || !strings.Contains(waitLine, "agent_exited") {
		t.Fatalf("prompt --wait \"crash 3\": exit %d, %q", code, wait)
	}
	if !strings.Contains(stderr.String(), waitLine) {
		t.Errorf("berth run says\n%s\nnot what prompt --wait says:\n%s", stderr.String(), waitLine)
	}
}

// A berth that go run built (README.md, Set up) is not on the user's
// PATH: berth run's closing hint names `go run ./cmd/berth` then.
func TestRunHintNamesHowBerthWasRun(t *testing.T) {
	for exe, want := range map[string]bool{
		"/tmp/go-build129379752/b001/exe/berth":         true,
		"/home/u/.cache/go-build/ab/abcdef0123-d/berth": true,
		"/srv/gocache/ab/abcdef0123-d/berth":            true,
		"/usr/local/bin/berth":                          false,
		"/home/u/src/berth/berth":                       false,
	} {
		if got := isGoRunBinary(exe, "/srv/gocache"); got != want {
			t.Errorf("isGoRunBinary(%s) = %v", exe, got)
		}
	}
	for _, inProcess := range []bool{true, false} {
		hint := leftBehind("ses_1", inProcess, goRunCommand)
		if strings.Contains(strings.ReplaceAll(hint, goRunCommand, ""), "berth ") {
			t.Errorf("in-process %v: the hint names a bare berth: %q", inProcess, hint)
		}
	}
	if hint := leftBehind("ses_1", true, goRunCommand); !strings.Contains(hint, "go run ./cmd/berth serve") || !strings.Contains(hint, "go run ./cmd/berth resume ses_1") {
		t.Errorf("hint of a go run: %q", hint)
	}
	if hint := leftBehind("ses_1", true, "berth"); !strings.Contains(hint, "berth serve (in another terminal), then berth resume ses_1") {
		t.Errorf("hint of an installed berth: %q", hint)
	}
}
