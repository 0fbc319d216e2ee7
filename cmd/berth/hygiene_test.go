package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/bench"
	"github.com/berth-sh/berth/sandbox/docker"

	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/internal/testenv"
)

// zombiesOf returns the zombie children of the given parents.
func zombiesOf(parents ...int) []string {
	var out []string
	for _, pid := range procfs.PIDs() {
		if st, err := procfs.ReadStat(pid); err == nil && st.State == 'Z' && slices.Contains(parents, st.PPID) {
			out = append(out, fmt.Sprintf("%d (%s)", pid, st.Comm))
		}
	}
	return out
}

// containersOf lists the containers on the test engine labelled with one
// of the sessions.
func containersOf(t *testing.T, ids map[string]bool) []string {
	t.Helper()
	host := os.Getenv("BERTH_TEST_DOCKER_HOST")
	if host == "" {
		return nil
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelManaged+"=true")})
	if err != nil {
		t.Fatalf("docker: %v", err)
	}
	var out []string
	for _, c := range list.Items {
		if ids[c.Labels[docker.LabelSession]] {
			out = append(out, c.ID[:12]+" "+c.Labels[docker.LabelSession])
		}
	}
	return out
}

// After creating, stopping and deleting 100 sessions on every provider,
// nothing of theirs remains: no process, no shim, no container, and no
// zombie under the daemon.
func TestHundredSessionsLeaveNothing(t *testing.T) {
	home := t.TempDir()
	s := startServerEnv(t, home, providerEnv())
	health := s.health(t)
	providers := []string{berth.SandboxHost}
	for _, p := range []string{berth.SandboxBwrap, berth.SandboxDocker} {
		if slices.Contains(health.Sandboxes, p) {
			providers = append(providers, p)
		} else if testenv.Required() {
			t.Fatalf("sandbox %s is not available (health lists %v)", p, health.Sandboxes)
		} else {
			t.Logf("sandbox %s is not available here: its share runs on host", p)
		}
	}
	const n = 100
	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				provider := providers[i%len(providers)]
				var sess berth.Session
				if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": provider}, &sess); st != 201 || sess.State != berth.StateActive {
					errs <- fmt.Errorf("create %d on %s = %d %v %+v", i, provider, st, err, sess.Failure)
					continue
				}
				mu.Lock()
				ids[sess.ID] = true
				mu.Unlock()
				path := "/v1/sessions/" + sess.ID
				// Half of them leave a turn and a terminal running for the stop to end.
				text := "echo hi"
				if i%2 == 0 {
					text = "run sleep 30"
				}
				if st, _ := s.api("POST", path+"/prompts", map[string]string{"text": text}, nil); st != 202 {
					errs <- fmt.Errorf("prompt %d = %d", i, st)
				}
				if i%2 == 0 {
					// Stop once the terminal runs.
					deadline := time.Now().Add(30 * time.Second)
					for !s.logged(sess.ID, berth.EventTerminalStarted) && time.Now().Before(deadline) {
						time.Sleep(20 * time.Millisecond)
					}
					if !s.logged(sess.ID, berth.EventTerminalStarted) {
						errs <- fmt.Errorf("session %d: no terminal_started within 30s", i)
					}
				}
				if st, _ := s.api("POST", path+"/stop", nil, nil); st != 200 {
					errs <- fmt.Errorf("stop %d = %d", i, st)
				}
				if st, _ := s.api("DELETE", path, nil, nil); st != 204 && st != 200 {
					errs <- fmt.Errorf("delete %d = %d", i, st)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		z := zombiesOf(s.cmd.Process.Pid, os.Getpid())
		// The daemon keeps a spare shim started ahead per shim program (the
		// small one for host and bwrap, berth shim once docker was used),
		// and no shim that serves a session.
		shims, serving := shimsOf(home), bench.ShimPIDs(filepath.Join(home, "run"))
		cs := containersOf(t, ids)
		if len(z) == 0 && len(shims) <= 2 && len(serving) == 0 && len(cs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: zombies %v, shims %v (serving a session %v), containers %v", z, shims, serving, cs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for id := range ids {
		if pids := agentPIDs(id); len(pids) > 0 {
			t.Fatalf("session %s left processes %v", id, pids)
		}
	}
	s.stop()
	if left := shimsOf(home); len(left) != 0 {
		t.Fatalf("shims left after the daemon stopped: %v", left)
	}
	assertNoProcessUnder(t, home)
	entries, _ := os.ReadDir(home + "/run")
	var names []string
	for _, e := range entries {
		// The daemon's view of /etc, which every bwrap sandbox binds, is
		// no session's: it stays, as the daemon's other files do.
		if n := e.Name(); n != "etc" && n != "etc.new" {
			names = append(names, n)
		}
	}
	if len(names) != 0 {
		t.Fatalf("files left in the run directory: %v", names)
	}
}

// logged reports whether the first page of session id's log holds an
// event of type typ. It may run outside the test's goroutine.
func (s *server) logged(id, typ string) bool {
	var page struct {
		Events []berth.Event `json:"events"`
	}
	if st, err := s.api("GET", "/v1/sessions/"+id+"/events?limit=1000", nil, &page); st != 200 || err != nil {
		return false
	}
	for _, ev := range page.Events {
		if ev.Type == typ {
			return true
		}
	}
	return false
}
