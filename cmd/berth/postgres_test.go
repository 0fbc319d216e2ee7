package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
)

// freshPostgres returns the URL of a new, empty database on the test server
// (BERTH_TEST_POSTGRES_URL), dropped when the test ends. Without a server
// the test skips, or fails when BERTH_REQUIRE_INTEGRATION=1.
func freshPostgres(t *testing.T) string {
	t.Helper()
	return pgtest.Fresh(t, "berth_e2e_")
}

func TestSIGKILLMidFloodLosesNothingSeenOnPostgres(t *testing.T) {
	crashMidFlood(t, func() []string { return []string{"--store", freshPostgres(t)} })
}

// A second daemon on the same PostgreSQL, after the first stopped, lists
// the same sessions and serves their whole logs; health names the store.
func TestSecondDaemonOnTheSamePostgres(t *testing.T) {
	db := freshPostgres(t)
	s1 := startServer(t, t.TempDir(), "--store", db)
	var h berth.Health
	if st, _ := s1.api("GET", "/v1/health", nil, &h); st != 200 || h.Store != "postgres" {
		t.Fatalf("health = %d %+v", st, h)
	}
	var ids []string
	for range 2 {
		sess := s1.create(t, nil)
		var r berth.TurnResult
		s1.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "echo one\nflood 3000 16\necho two"}, &r)
		if r.StopReason != "end_turn" {
			t.Fatalf("turn = %+v", r)
		}
		ids = append(ids, sess.ID)
	}
	s1.stop()
	s2 := startServer(t, t.TempDir(), "--store", db)
	var list berth.SessionPage
	s2.api("GET", "/v1/sessions", nil, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("second daemon lists %d sessions", len(list.Sessions))
	}
	for _, id := range ids {
		evs := s2.allEvents(t, id)
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("log of %s not contiguous at %d", id, i)
			}
		}
		if len(evs) < 3000 || evs[len(evs)-1].Type != berth.EventSessionStopped {
			t.Fatalf("log of %s: %d events ending %s", id, len(evs), evs[len(evs)-1].Type)
		}
	}
}

func TestServeRefusesABadStoreURL(t *testing.T) {
	home := t.TempDir()
	for _, u := range []string{"postgres://u:secretpw@127.0.0.1:1/x", "postgres://u:secretpw@[::1/x", "mysql://x"} {
		// The minute only turns a serve that does not give up into a
		// failure (killed, it does not exit 1).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--home", home, "--addr", "127.0.0.1:0", "--store", u)
		cmd.Env = cleanEnv(home)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(string(out), "secretpw") ||
			strings.Contains(string(out), "panic") || !strings.Contains(string(out), "berth:") {
			t.Fatalf("serve --store %s: %v\n%s", u, err, out)
		}
	}
}
