package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// shimSessions maps the pid of each shim serving a session of home to its
// session, from the shims' pid files (<session>.<nonce>.pid).
func shimSessions(home string) map[int]string {
	out := map[int]string{}
	files, _ := filepath.Glob(filepath.Join(home, "run", "ses_*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		id, _, _ := strings.Cut(filepath.Base(f), ".")
		out[pid] = id
	}
	return out
}

// unowned returns the berth processes of home that the live daemon s does
// not own: agents of sessions it does not run, shims of such sessions, and
// more than one spare shim.
func unowned(t *testing.T, s *server, home string, ids []string) []string {
	t.Helper()
	// Every session the daemon knows, live or not: a create the killed
	// daemon never answered may still have made one.
	live := map[string]bool{}
	known := append([]string(nil), ids...)
	cursor := ""
	for {
		var page berth.SessionPage
		if st, err := s.api("GET", "/v1/sessions?limit=1000&cursor="+cursor, nil, &page); st != 200 {
			t.Fatalf("list sessions: %d %v", st, err)
		}
		for _, sess := range page.Sessions {
			known = append(known, sess.ID)
			if sess.State == berth.StateActive {
				live[sess.ID] = true
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	ids = known
	var bad []string
	for _, id := range ids {
		if live[id] {
			continue
		}
		for _, pid := range agentPIDs(id) {
			if alive(pid) {
				bad = append(bad, "agent "+strconv.Itoa(pid)+" of "+id)
			}
		}
	}
	serving := shimSessions(home)
	spares := 0
	for _, pid := range shimsOf(home) {
		if !alive(pid) {
			continue
		}
		id, ok := serving[pid]
		switch {
		case !ok:
			spares++
		case !live[id]:
			bad = append(bad, "shim "+strconv.Itoa(pid)+" of "+id)
		}
	}
	if spares > 1 {
		bad = append(bad, strconv.Itoa(spares)+" spare shims")
	}
	return bad
}

// A daemon SIGKILLed at random points under load, 20 times, leaves no
// berth process that no live daemon owns: each next daemon reattaches or
// ends what the last one left.
func TestSIGKILLAtRandomPointsLeavesNothingUnowned(t *testing.T) {
	home := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var mu sync.Mutex
	var ids []string
	var s *server
	for round := range 20 {
		s = startServer(t, home)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					var sess berth.Session
					if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, &sess); st != 201 {
						continue
					}
					mu.Lock()
					ids = append(ids, sess.ID)
					mu.Unlock()
					text := "sleep " + strconv.Itoa(100*(1+(w+i)%5))
					_, _ = s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]string{"text": text}, nil)
					if (w+i)%3 == 0 {
						_, _ = s.api("DELETE", "/v1/sessions/"+sess.ID, nil, nil)
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		s.kill9()
		close(stop)
		wg.Wait()
		t.Logf("round %d: killed; %d sessions so far", round, len(ids))
	}
	s = startServer(t, home)
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad := unowned(t, s, home, ids)
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for pid, id := range shimSessions(home) {
				var sess berth.Session
				st, _ := s.api("GET", "/v1/sessions/"+id, nil, &sess)
				logs, _ := filepath.Glob(filepath.Join(home, "run", id+".*.log"))
				var text []byte
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					text = append(text, b...)
				}
				t.Logf("shim %d of %s: GET %d state %s stop %s; alive %v\nshim log:\n%s", pid, id, st, sess.State, sess.StopReason, alive(pid), text)
			}
			t.Logf("daemon log:\n%s", s.log)
			t.Fatalf("processes no live daemon owns: %v", bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
