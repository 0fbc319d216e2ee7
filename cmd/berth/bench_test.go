package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/bench"
	"github.com/berth-sh/berth/internal/testenv"
)

// A short soak on a real daemon passes, and its measure sees the
// processes a live session holds.
func TestSoakRunsCleanAndCountsLiveProcesses(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySession(t, nil)
	if n := len(bench.HomeProcesses(home)); n < 1 {
		t.Fatalf("homeProcesses counts %d processes for a home with a live session %s", n, sess.ID)
	}
	cmd := exec.Command(bin, "bench", "--soak", "40", "--soak-in-flight", "8")
	cmd.Env = cleanEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "soak: after") {
		t.Fatalf("soak printed no figures:\n%s", out)
	}
}

// benchReport runs `berth bench ARGS -o json` on a home of its own and
// decodes its report, the last line of its output, into r.
func benchReport(t *testing.T, r any, args ...string) {
	t.Helper()
	benchReportEnv(t, r, nil, args...)
}

// benchReportEnv is benchReport with env added to the bench's environment.
func benchReportEnv(t *testing.T, r any, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"bench"}, args...), "-o", "json")...)
	cmd.Env = append(cleanEnv(t.TempDir()), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), r); err != nil {
		t.Fatalf("last line is not the JSON report: %q", lines[len(lines)-1])
	}
}

// berth bench reports its figures: creates, the first event, the flood,
// paging a long log and the sessions list, the baseline without berth,
// and the all-sessions stream's fan-out.
func TestBenchReportsFigures(t *testing.T) {
	var r bench.Result
	benchReport(t, &r, "--sessions", "2", "--prompts", "3", "--flood", "5000",
		"--page-log", "20000", "--list-sessions", "250", "--fanout", "5", "--fanout-seconds", "1s")
	if r.CreateP50Ms <= 0 || r.CreateP99Ms < r.CreateP50Ms || r.FirstEventP50Ms <= 0 || r.IngestPerSec <= 0 || r.FloodEvents < 5000 || r.Store != "sqlite" ||
		r.PageLogEvents != 20000 || r.PageP50Ms <= 0 || r.ListedSessions != 250 || r.ListPagesWalked != 3 || r.ListPageP50Ms <= 0 {
		t.Fatalf("report = %+v", r)
	}
	// The baseline ran beside the daemon: the agent started and prompted
	// with no berth, and (the daemon runs shims) a daemon without them.
	if r.CreateDirectP50Ms <= 0 || r.CreateDirectP99Ms < r.CreateDirectP50Ms || r.CreateRatio <= 0 ||
		r.AgentEventDirectP50Ms <= 0 || r.AgentEventNoShimP50Ms <= 0 || r.AgentEventShimRatio <= 0 ||
		r.AgentEventDirectRatio <= 0 {
		t.Fatalf("baseline report = %+v", r)
	}
	// Every change of the fan-out run reached every reader.
	if r.FanoutSubscribers != 5 || r.FanoutChanges <= 0 || r.FanoutDelivered < 5*r.FanoutChanges ||
		r.FanoutResyncs != 0 || r.FanoutLatencyP50Ms <= 0 || r.FanoutPerSec <= 0 {
		t.Fatalf("fan-out report = %+v", r)
	}
}

// berth bench --children reports spawn → active and both prompt paths,
// each prompt's answer checked by the bench itself.
func TestBenchChildrenReportsFigures(t *testing.T) {
	var c bench.Result
	benchReport(t, &c, "--sessions", "1", "--prompts", "3", "--flood", "0",
		"--page-log", "0", "--list-sessions", "0", "--children", "6")
	if c.Children != 6 || c.SpawnP50Ms <= 0 || c.SpawnP99Ms < c.SpawnP50Ms || c.ChildPrompts != 3 ||
		c.MCPPromptP50 <= 0 || c.APIPromptP50 <= 0 {
		t.Fatalf("children report = %+v", c)
	}
}

// berth bench --prompts-at-once reports both daemons' first agent events,
// checkpoints on and off, over the same number of live sessions each.
func TestBenchAtOnceReportsBothDaemons(t *testing.T) {
	var r struct {
		AtOnce int     `json:"at_once"`
		Live   int     `json:"live_sessions"`
		OnP50  float64 `json:"first_agent_event_checkpoints_on_p50_ms"`
		OffP50 float64 `json:"first_agent_event_checkpoints_off_p50_ms"`
		Ratio  float64 `json:"checkpoints_on_over_off_p50"`
	}
	// 30 sessions a daemon: more than one batch of the two daemons' turns.
	benchReport(t, &r, "--sessions", "30", "--prompts-at-once", "3", "--prompts", "2", "--prompt-gap", "20ms")
	if r.AtOnce != 3 || r.Live != 30 || r.OnP50 <= 0 || r.OffP50 <= 0 || r.Ratio <= 0 {
		t.Fatalf("report: %+v", r)
	}
}

// `berth bench --cluster 3` runs three nodes on one PostgreSQL and reports
// every figure of BENCHMARKS.md "Cluster" (measured, so not compared here to
// any goal: BENCHMARKS.md has them).
func TestBenchClusterReportsItsFigures(t *testing.T) {
	db := freshPostgres(t)
	var r struct {
		Nodes     int       `json:"nodes"`
		Creates   float64   `json:"creates_per_sec"`
		CrossP50  float64   `json:"cross_node_prompt_first_sse_p50_ms"`
		CrossP99  float64   `json:"cross_node_prompt_first_sse_p99_ms"`
		Forwarded float64   `json:"forwarded_write_p50_ms"`
		Direct    float64   `json:"direct_write_p50_ms"`
		Failover  float64   `json:"failover_ms"`
		CPU       []float64 `json:"daemon_cpu_ms"`
	}
	benchReport(t, &r, "--cluster", "3", "--sessions", "6", "--prompts", "5", "--store", db)
	if r.Nodes != 3 || r.Creates <= 0 || r.CrossP50 <= 0 || r.CrossP99 < r.CrossP50 || r.Forwarded <= 0 || r.Direct <= 0 ||
		r.Failover < float64(time.Second.Milliseconds()) || len(r.CPU) != 3 {
		t.Fatalf("report: %+v", r)
	}
}

// `berth bench --cluster 2 --storage URL` keeps the nodes' sessions in a
// real S3 server (SeaweedFS) and reports the store's figures: turns with
// it on and off, a sync, an upload, restores of what it synced, and the
// lost node's sessions active on the other node, workspace and all.
func TestBenchClusterStorageReportsItsFigures(t *testing.T) {
	db := freshPostgres(t)
	s3 := testenv.S3Server(t)
	var r struct {
		Failover float64 `json:"failover_ms"`
		Storage  *struct {
			Turns      int                `json:"turns"`
			On         float64            `json:"turn_storage_on_p50_ms"`
			OffP50     float64            `json:"turn_storage_off_p50_ms"`
			SyncFiles  int                `json:"sync_files"`
			SyncMs     float64            `json:"sync_files_ms"`
			Upload     int64              `json:"upload_bytes"`
			UploadRate float64            `json:"upload_mib_per_sec"`
			Restores   []float64          `json:"restore_ms"`
			Active     map[string]float64 `json:"failover_active_ms"`
		} `json:"storage"`
	}
	benchReportEnv(t, &r, s3.Environ(), "--cluster", "2", "--sessions", "2", "--prompts", "3", "--store", db,
		"--storage", s3.URL, "--storage-files", "300", "--storage-upload-mib", "16")
	st := r.Storage
	if st == nil || st.Turns != 20 || st.On <= 0 || st.OffP50 <= 0 || st.SyncFiles != 300 || st.SyncMs <= 0 ||
		st.Upload != 16<<20 || st.UploadRate <= 0 || len(st.Restores) != 5 || len(st.Active) != 3 {
		t.Fatalf("report: %+v %+v", r, st)
	}
	for what, ms := range st.Active {
		if ms < r.Failover {
			t.Fatalf("%s active elsewhere %.0f ms after the kill, before it was found lost (%.0f ms)", what, ms, r.Failover)
		}
	}
}

// `berth bench --gateway` times calls straight to the model stand-in and
// through a gateway made as the daemon's (the store's credential, the
// manager's usage): every call through it reached the stand-in with the
// stored credential and is counted in its session's usage, and each
// figure is taken both ways.
func TestBenchGatewayReportsBothWays(t *testing.T) {
	var r bench.GatewayResult
	benchReport(t, &r, "--gateway", "5", "--gateway-streams", "4", "--gateway-rounds", "1", "--gateway-gap", "1ms", "--gateway-body", "2000")
	if r.GatewayCalls == 0 || r.UpstreamCalls != r.GatewayCalls || r.ModelCallsCounted != r.GatewayCalls || r.Streams != 4 {
		t.Fatalf("calls: %+v", r)
	}
	for name, f := range map[string]bench.GatewayFigures{"call": r.Call, "first byte": r.FirstByte,
		"streams' first byte": r.StreamsFirstByte, "streams' call": r.StreamsCall} {
		if f.DirectP50Ms <= 0 || f.GatewayP50Ms <= 0 || f.DirectP99Ms < f.DirectP50Ms || f.AddedP50Ms != f.GatewayP50Ms-f.DirectP50Ms {
			t.Fatalf("%s: %+v", name, f)
		}
	}
	if r.BodyBytes < 2000 {
		t.Fatalf("report: %+v", r)
	}
}

// --reattach-against boots the other binary and this one in turn over
// the sessions the first daemon left, and reports every boot; then
// --reattach-gone leaves the shims with no daemon for a while.
func TestBenchBootsTwoBinariesInTurn(t *testing.T) {
	var r struct {
		GoneMs float64 `json:"gone_ms"`
		Boots  []struct {
			Daemon string  `json:"daemon"`
			AllMs  float64 `json:"all_active_ms"`
			Reads  struct {
				ListMs float64 `json:"list_ms"`
			} `json:"reads"`
		} `json:"reattach_boots"`
	}
	benchReport(t, &r, "--reattach", "3", "--reattach-against", bin, "--reattach-rounds", "2", "--reattach-gone", "1s",
		"--sessions", "1", "--prompts", "0", "--flood", "0", "--page-log", "0", "--list-sessions", "0")
	var order []string
	for _, b := range r.Boots {
		if b.AllMs <= 0 || b.Reads.ListMs <= 0 {
			t.Fatalf("a boot without its figures: %+v", b)
		}
		order = append(order, b.Daemon)
	}
	if got := strings.Join(order, " "); got != "daemon-binary against against daemon-binary" {
		t.Fatalf("boots %q, want the two binaries in turn", got)
	}
	if r.GoneMs != 1000 {
		t.Fatalf("gone_ms = %v, want 1000", r.GoneMs)
	}
}
