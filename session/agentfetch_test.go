package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/internal/procfs"
)

// fetchEnv is a manager whose catalog (config's) runs agent "fetched" with
// npx from package fetched-agent@1.0.0, fetched into a prefix of the
// daemon's by an npm on PATH that lays the package out as npm does (its
// program runs the demo agent), after FAKE_NPM_SLEEP seconds, or fails
// with FAKE_NPM_FAIL's words.
func fetchEnv(t *testing.T) (*env, *config.Catalog) {
	t.Helper()
	self, _ := os.Executable()
	bin := t.TempDir()
	script := `#!/bin/sh
# npm install --prefix DIR ... -- PKG
echo "$$" > "$FAKE_NPM_PIDFILE"
sleep "${FAKE_NPM_SLEEP:-0}"
[ -n "$FAKE_NPM_FAIL" ] && { echo "npm error code E404" >&2; echo "$FAKE_NPM_FAIL" >&2; exit 1; }
prefix=$3
for a; do pkg=$a; done
name=${pkg%@*}
mkdir -p "$prefix/node_modules/$name/bin"
printf '{"name":"%s","version":"1.0.0","bin":{"%s":"bin/agent"}}' "$name" "$name" > "$prefix/node_modules/$name/package.json"
printf '#!/bin/sh\nexec %s "$@"\n' "` + self + `" > "$prefix/node_modules/$name/bin/agent"
chmod +x "$prefix/node_modules/$name/bin/agent"
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	// npx's own cache is not where the package could be found.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("npm_config_cache", t.TempDir())
	t.Setenv("FAKE_NPM_PIDFILE", filepath.Join(bin, "npm.pid"))
	cfg := config.Default()
	cfg.Agents = []berth.AgentSpec{{Name: "fetched", Command: "npx", Args: []string{"-y", "fetched-agent@1.0.0"},
		Env: map[string]string{agentEnvVar: "demo"}}}
	cat, err := cfg.Catalog("")
	if err != nil {
		t.Fatal(err)
	}
	cat.WithPackages(filepath.Join(t.TempDir(), "agents"))
	old := fetchEvery
	fetchEvery = 50 * time.Millisecond
	t.Cleanup(func() { fetchEvery = old })
	return newEnv(t, func(o *Options) { o.Catalog = cat }), cat
}

// fetchPhases returns the phases of a session's agent_fetch events and
// the position of its session_started (-1 when none).
func fetchPhases(t *testing.T, e *env, id string) (phases []string, fetched []map[string]any, started int) {
	t.Helper()
	started = -1
	for _, ev := range e.events(id) {
		switch ev.Type {
		case berth.EventAgentFetch:
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			phases = append(phases, d["phase"].(string))
			fetched = append(fetched, d)
		case berth.EventSessionStarted:
			started = len(phases)
		}
	}
	return phases, fetched, started
}

// An npx agent whose package is nowhere here is fetched before its start,
// with its own progress in the session's log, and then runs from the
// daemon's prefix; the next session of it fetches nothing.
func TestAnNpxAgentIsFetchedBeforeItsStart(t *testing.T) {
	e, cat := fetchEnv(t)
	t.Setenv("FAKE_NPM_SLEEP", "0.4")
	s := e.create(berth.CreateRequest{Agent: "fetched"})
	if s.State != berth.StateActive {
		t.Fatalf("state %s, failure %+v", s.State, s.Failure)
	}
	phases, data, started := fetchPhases(t, e, s.ID)
	if len(phases) < 3 || phases[0] != "started" || phases[len(phases)-1] != "done" || !slices.Contains(phases, "fetching") {
		t.Fatalf("agent_fetch phases %v, want started, fetching…, done", phases)
	}
	if started != len(phases) {
		t.Fatalf("session_started came after %d of %d agent_fetch events, want after all", started, len(phases))
	}
	if data[0]["package"] != "fetched-agent@1.0.0" {
		t.Fatalf("agent_fetch data %v", data[0])
	}
	if spec, _ := cat.Get("fetched"); !strings.HasSuffix(spec.Command, "/node_modules/fetched-agent/bin/agent") {
		t.Fatalf("the agent runs %q, not from the daemon's prefix", spec.Command)
	}
	if res := e.prompt(s.ID, "hello"); res.StopReason != "end_turn" {
		t.Fatalf("turn %+v", res)
	}
	again := e.create(berth.CreateRequest{Agent: "fetched"})
	if phases, _, _ := fetchPhases(t, e, again.ID); len(phases) != 0 || again.State != berth.StateActive {
		t.Fatalf("the second session: state %s, agent_fetch %v", again.State, phases)
	}
}

// A fetch that fails ends the start startup_failed with npm's own words,
// told in the log too; nothing of the package is left to run.
func TestAFailedFetchFailsTheStart(t *testing.T) {
	e, cat := fetchEnv(t)
	t.Setenv("FAKE_NPM_FAIL", "404 Not Found - fetched-agent is not in this registry")
	s, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "fetched"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateStopped || got.StopReason != berth.StopStartupFailed || got.Failure == nil ||
		!strings.Contains(got.Failure.Message, "is not in this registry") {
		t.Fatalf("session %s %s %+v, want startup_failed with npm's words", got.State, got.StopReason, got.Failure)
	}
	// started, a "fetching" for each fetchEvery the fetch took, failed.
	phases, data, _ := fetchPhases(t, e, s.ID)
	last := len(phases) - 1
	if last < 1 || phases[0] != "started" || phases[last] != "failed" ||
		!strings.Contains(data[last]["error"].(string), "is not in this registry") {
		t.Fatalf("agent_fetch %v", data)
	}
	for _, p := range phases[1:last] {
		if p != "fetching" {
			t.Fatalf("agent_fetch phases %v", phases)
		}
	}
	if spec, _ := cat.Get("fetched"); spec.Command != "npx" {
		t.Fatalf("after a failed fetch the agent runs %q", spec.Command)
	}
}

// A stop during the fetch ends it at once: npm is killed and the session
// stopped, not left starting until the download is over.
func TestAStopEndsTheFetch(t *testing.T) {
	e, _ := fetchEnv(t)
	t.Setenv("FAKE_NPM_SLEEP", "60")
	created := make(chan *berth.Session, 1)
	go func() {
		s, _ := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "fetched"})
		created <- s
	}()
	var id string
	waitFor(t, "the fetch to start", func() bool {
		page, err := e.m.ListSessions(context.Background(), berth.SessionFilter{})
		if err != nil || len(page.Sessions) != 1 {
			return false
		}
		id = page.Sessions[0].ID
		phases, _, _ := fetchPhases(t, e, id)
		return len(phases) > 0
	})
	// npm writes its pid first thing, a moment after the fetch began.
	var raw []byte
	waitFor(t, "npm to start", func() bool {
		var err error
		raw, err = os.ReadFile(os.Getenv("FAKE_NPM_PIDFILE"))
		return err == nil && len(raw) > 0
	})
	began := time.Now()
	if _, err := e.m.StopSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s := <-created
	if took := time.Since(began); took > 10*time.Second || s == nil {
		t.Fatalf("the stop took %s; create answered %+v", took, s)
	}
	got, _ := e.m.GetSession(context.Background(), id)
	if got.State != berth.StateStopped {
		t.Fatalf("state %s", got.State)
	}
	var pid int
	if _, err := fmt.Sscan(string(raw), &pid); err != nil {
		t.Fatal(err)
	}
	if st, err := procfs.ReadStat(pid); err == nil && st.Live() {
		t.Fatalf("npm (%d) still runs after the stop", pid)
	}
}
