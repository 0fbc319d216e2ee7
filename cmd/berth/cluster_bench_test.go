package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// daemonCPU is the CPU time (user + system) a daemon has used so far, from
// the scheduler's count of each of its threads.
func daemonCPU(s *server) time.Duration {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/task/*/schedstat")
	var sum time.Duration
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				sum += time.Duration(ns)
			}
		}
	}
	return sum
}

// pct returns the p-th percentile of ds (sorted in place).
func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// The figures of BENCHMARKS.md, "Cluster", that concern
// forwarding and cross-node streams, on three real nodes on loopback:
// the same write sent to the owner and through another node, alternated;
// and a prompt sent through B while C streams the session: the time from
// the request to C's first event of the turn. It only measures (it
// asserts no speed); run it with BERTH_BENCH_CLUSTER=1 and
// BERTH_TEST_POSTGRES_URL set, -v to see the figures.
func TestClusterForwardFigures(t *testing.T) {
	if os.Getenv("BERTH_BENCH_CLUSTER") == "" {
		t.Skip("a measurement: set BERTH_BENCH_CLUSTER=1 to run it")
	}
	n := 300
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_CLUSTER_N")); err == nil && v > 0 {
		n = v
	}
	db := freshPostgres(t)
	a, b, c := startNode(t, db, "node-a"), startNode(t, db, "node-b"), startNode(t, db, "node-c")
	sess := a.create(t, nil)
	id := sess.ID
	path := "/v1/sessions/" + id

	// One write with no agent in it (PATCH of a label), then a whole turn.
	for _, w := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"PATCH labels", "PATCH", path, `{"labels":{"k":"v"}}`, 200},
		{"prompt ?wait=true (echo)", "POST", path + "/prompts?wait=true", `{"text":"echo x"}`, 200},
	} {
		var direct, via []time.Duration
		// CPU of each node while a request goes through B, and while one
		// goes straight to A (B's background: heartbeats, notices).
		var cpuA, cpuB, idleB time.Duration
		for i := range n + 10 {
			for _, through := range []*server{a, b} {
				a0, b0 := daemonCPU(a), daemonCPU(b)
				began := time.Now()
				if st, body := rawCall(t, through, w.method, w.path, w.body); st != w.status {
					t.Fatalf("%s: %d %s", w.name, st, body)
				}
				took := time.Since(began)
				if i < 10 {
					continue // warm-up
				}
				if through == a {
					direct = append(direct, took)
					idleB += daemonCPU(b) - b0
				} else {
					via = append(via, took)
					cpuA += daemonCPU(a) - a0
					cpuB += daemonCPU(b) - b0
				}
			}
		}
		t.Logf("%s, %d each: direct to the owner p50 %s p99 %s; through another node p50 %s p99 %s; "+
			"per forwarded request the forwarding node used %s CPU (%s while idle beside a direct one), the owner %s",
			w.name, n, pct(direct, .5), pct(direct, .99), pct(via, .5), pct(via, .99),
			cpuB/time.Duration(n), idleB/time.Duration(n), cpuA/time.Duration(n))
	}

	// Cross-node: prompt through B, first event of the turn on C's stream;
	// same-node for comparison: prompt on A, first event on A's stream.
	for _, pair := range []struct {
		name             string
		prompt, streamOn *server
	}{{"prompt on A, stream on A", a, a}, {"prompt through B, stream on C", b, c}} {
		var last int64
		if evs := a.allEvents(t, id); len(evs) > 0 {
			last = evs[len(evs)-1].Seq
		}
		f := follow(t, pair.streamOn, "/v1/sessions/"+id+"/events/stream", last)
		var first []time.Duration
		for i := range n + 10 {
			began := time.Now()
			if st, body := rawCall(t, pair.prompt, "POST", path+"/prompts", `{"text":"echo y"}`); st != 202 {
				t.Fatalf("prompt: %d %s", st, body)
			}
			evs := f.until(t, 30*time.Second, func(berth.Event) bool { return true })
			took := time.Since(began)
			// The rest of the turn, so the next prompt starts a new one.
			evs = append(evs, f.until(t, 30*time.Second, func(ev berth.Event) bool { return ev.Type == berth.EventTurnEnded })...)
			if evs[0].Seq != last+1 {
				t.Fatalf("the stream went from %d to %d", last, evs[0].Seq)
			}
			last = evs[len(evs)-1].Seq
			if i >= 10 {
				first = append(first, took)
			}
		}
		f.stop()
		t.Logf("%s, %d prompts: request → first SSE event of the turn p50 %s p99 %s", pair.name, n, pct(first, .5), pct(first, .99))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average: %s", strings.TrimSpace(string(load)))
}
