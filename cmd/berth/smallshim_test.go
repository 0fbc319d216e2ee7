package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
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

// A berth that carries no small shim runs `berth shim` for every session
// and says so once.
func TestWithoutTheSmallShimShimsRunBerth(t *testing.T) {
	plain := plainBerth(t)
	home := t.TempDir()
	s := startServerFree(t, plain, home, nil)
	sess := s.echoSession(t, berth.SandboxHost)
	if exe := exeOf(t, sessionShim(t, home, sess.ID)); exe != plain {
		t.Fatalf("the shim runs %s, want %s", exe, plain)
	}
	if got := installedShims(home); len(got) != 0 {
		t.Errorf("home/bin holds %v", got)
	}
	s.stop()
	if n := strings.Count(s.log.String(), "carries no small shim"); n != 1 {
		t.Errorf("the log says %d times that there is no small shim:\n%s", n, s.log)
	}
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

			// The shim is in place before the daemon answers.
			s = startServer(t, home)
			fi, err := os.Lstat(path)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v %v", path, fi, err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, smallShimBytes(t)) {
				t.Fatal("the planted program was left in place")
			}
			sess := s.echoSession(t, berth.SandboxHost)
			if exe := exeOf(t, sessionShim(t, home, sess.ID)); exe != path {
				t.Fatalf("the shim runs %s, want %s", exe, path)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the planted program ran")
			}
		})
	}
}
