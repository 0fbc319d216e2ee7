package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// clusterResult is what `berth bench --cluster N` reports: N `berth
// serve` nodes on loopback ports sharing one PostgreSQL database
// (docs/api.md, "Cluster nodes: ownership and failover").
type clusterResult struct {
	Machine  string  `json:"machine"`
	Load     float64 `json:"load_average"`
	Nodes    int     `json:"nodes"`
	LeaseTTL string  `json:"lease_ttl"`
	// CreatesPerSec: demo sessions created (to active) per second, round
	// robin over the nodes, CreatesInFlight at once.
	Creates         int     `json:"creates"`
	CreatesInFlight int     `json:"creates_in_flight"`
	CreatesPerSec   float64 `json:"creates_per_sec"`
	// CrossNodeFirstEvent*: a prompt sent to a node that does not own the
	// session (forwarded to the owner), until a third node's SSE stream of
	// the session delivers the turn's first event.
	Prompts                   int     `json:"prompts"`
	CrossNodeFirstEventP50    float64 `json:"cross_node_prompt_first_sse_p50_ms"`
	CrossNodeFirstEventP99    float64 `json:"cross_node_prompt_first_sse_p99_ms"`
	LocalFirstEventP50        float64 `json:"local_prompt_first_sse_p50_ms"`
	ForwardedWriteP50         float64 `json:"forwarded_write_p50_ms"`
	DirectWriteP50            float64 `json:"direct_write_p50_ms"`
	ForwardedWriteOverheadP50 float64 `json:"forwarded_write_overhead_p50_ms"`
	// FailoverMs: SIGKILL of a node until another node shows its session
	// stopped/node_lost.
	FailoverMs float64 `json:"failover_ms"`
	// DaemonCPUMs is the nodes' CPU time (user+sys) over the whole bench.
	DaemonCPUMs []float64 `json:"daemon_cpu_ms"`
	// Storage is what --storage adds: the nodes keep their sessions'
	// state in that object store, and a lost node's sessions move.
	Storage *storageResult `json:"storage,omitempty"`
}

// clusterNode is one node the bench started.
type clusterNode struct {
	id   string
	home string
	s    *benchServe
}

// benchCluster starts n nodes on the PostgreSQL database storeURL (its
// own: nodes register in it, sessions are left in it) and measures them:
// creates across the nodes, the cross-node prompt → SSE path, forwarded
// writes against direct ones, and the failover after a SIGKILL.
//
// With so.url the nodes keep their sessions' state in that object
// store (the AWS_* variables of the environment are its keys): it also
// times turns with the store on and off, the upload of a workspace, its
// restore, and the failover until the lost node's sessions are active
// on another node.
func benchCluster(ctx context.Context, o benchBootOptions, n, creates, prompts int, ttl time.Duration, so storageOptions, asJSON bool, out, progress io.Writer) error {
	if n < 2 {
		return fmt.Errorf("--cluster needs at least 2 nodes")
	}
	res := clusterResult{Machine: machine(), Nodes: n, LeaseTTL: ttl.String(), Creates: creates, Prompts: prompts}
	var moved map[string]string
	if so.url != "" {
		res.Storage = &storageResult{}
		if err := storageTurns(ctx, o, so.url, max(prompts, 20), res.Storage, progress); err != nil {
			return err
		}
	}
	nodes, err := startClusterNodes(ctx, o, n, creates, ttl, so.url)
	defer stopClusterNodes(nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "creating %d sessions across %d nodes…\n", creates, n)
	if err := clusterCreates(ctx, o, nodes, creates, &res); err != nil {
		return err
	}
	// A session of node 0, prompted through node 1, streamed from node 2
	// (node 0 when there are two); and, to compare, prompted on node 0.
	owner, via, reader := nodes[0], nodes[1], nodes[min(2, n-1)%n]
	if n == 2 {
		reader = nodes[0]
	}
	sess, err := owner.s.c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: o.sandbox})
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "%d prompts through %s, streamed from %s…\n", prompts, via.id, reader.id)
	if err := crossNodePrompts(ctx, owner, via, reader, sess.ID, prompts, &res); err != nil {
		return err
	}
	if err := forwardedWrites(ctx, owner, via, sess.ID, prompts, &res); err != nil {
		return err
	}
	if so.url != "" {
		synced, err := storageSync(ctx, o, owner, so, res.Storage, progress)
		if err != nil {
			return err
		}
		moved = map[string]string{"demo": sess.ID, fmt.Sprintf("%d files", so.files): synced[0],
			fmt.Sprintf("%.0f MiB", float64(res.Storage.UploadBytes)/(1<<20)): synced[1]}
	}
	for _, nd := range nodes {
		if cpu, err := procCPU(nd.s.cmd.Process.Pid); err == nil {
			res.DaemonCPUMs = append(res.DaemonCPUMs, float64(cpu.Microseconds())/1000)
		}
	}
	fmt.Fprintf(progress, "SIGKILL of %s…\n", owner.id)
	killed, err := failover(ctx, owner, via, sess.ID, ttl, &res)
	if err != nil {
		return err
	}
	if moved != nil {
		if err := failoverActive(ctx, owner, via, moved, killed, ttl, res.Storage); err != nil {
			return err
		}
	}
	res.Load = loadAverage()
	if asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(out, string(b))
		return nil
	}
	printCluster(out, res, ttl)
	return nil
}

// startClusterNodes starts n nodes, each in a home of its own on a free
// loopback port, and waits until each is healthy. It returns the nodes it
// started, also on error: the caller stops them.
func startClusterNodes(ctx context.Context, o benchBootOptions, n, creates int, ttl time.Duration, storageURL string) ([]*clusterNode, error) {
	nodes := make([]*clusterNode, 0, n)
	for i := range n {
		home, err := os.MkdirTemp("", "berth-bench-node-")
		if err != nil {
			return nodes, err
		}
		if err := writeBenchConfig(home, creates+10, true); err != nil {
			return nodes, err
		}
		addr, err := freeLoopback()
		if err != nil {
			return nodes, err
		}
		id := fmt.Sprintf("bench-%d", i+1)
		no := o
		no.addr = addr
		no.args = []string{"--node-id", id, "--advertise", "http://" + addr}
		env := []string{"BERTH_CLUSTER_TOKEN=bench-node-token", "BERTH_CLUSTER_LEASE_TTL=" + ttl.String()}
		if storageURL != "" {
			env = append(env, "BERTH_STORAGE_URL="+storageURL)
		}
		s, err := startBenchServe(no, home, env...)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, &clusterNode{id: id, home: home, s: s})
		if _, err := s.health(ctx, 30*time.Second); err != nil {
			return nodes, err
		}
	}
	return nodes, nil
}

// stopClusterNodes stops the nodes still running and removes their homes.
func stopClusterNodes(nodes []*clusterNode) {
	for _, nd := range nodes {
		if nd.s.cmd.ProcessState == nil {
			_ = nd.s.stop(time.Minute)
		}
		_ = os.RemoveAll(nd.home)
	}
}

// clusterCreates creates demo sessions round robin over the nodes, 4 a
// node at once, and records how many a second came up.
func clusterCreates(ctx context.Context, o benchBootOptions, nodes []*clusterNode, creates int, res *clusterResult) error {
	n := len(nodes)
	inFlight := 4 * n
	res.CreatesInFlight = inFlight
	began := time.Now()
	var ids []string
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := nodes[i%n].s.c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: o.sandbox})
			mu.Lock()
			defer mu.Unlock()
			if err == nil && s.State != berth.StateActive {
				err = fmt.Errorf("session %s is %s", s.ID, s.State)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				ids = append(ids, s.ID)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	res.CreatesPerSec = float64(creates) / time.Since(began).Seconds()
	return nil
}

// crossNodePrompts times prompts to the session id of owner sent through
// via until reader's stream delivers their first event, then the same
// on owner alone.
func crossNodePrompts(ctx context.Context, owner, via, reader *clusterNode, id string, prompts int, res *clusterResult) error {
	cross, err := promptToFirstEvent(ctx, via.s.c, reader.s.c, id, prompts)
	if err != nil {
		return err
	}
	local, err := promptToFirstEvent(ctx, owner.s.c, owner.s.c, id, prompts)
	if err != nil {
		return err
	}
	res.CrossNodeFirstEventP50, res.CrossNodeFirstEventP99 = pct(cross, 50), pct(cross, 99)
	res.LocalFirstEventP50 = pct(local, 50)
	return nil
}

// forwardedWrites times the same write (a rename of the session id) on its
// owner and through via, alternated so the machine's load moves both
// alike.
func forwardedWrites(ctx context.Context, owner, via *clusterNode, id string, prompts int, res *clusterResult) error {
	var direct, forwarded []time.Duration
	for i := range max(prompts, 20) {
		for _, c := range []*bclient.Client{owner.s.c, via.s.c} {
			t0 := time.Now()
			name := fmt.Sprintf("bench-%d", i)
			if _, err := c.PatchSession(ctx, id, berth.SessionPatch{Name: &name}); err != nil {
				return err
			}
			if c == owner.s.c {
				direct = append(direct, time.Since(t0))
			} else {
				forwarded = append(forwarded, time.Since(t0))
			}
		}
	}
	res.DirectWriteP50, res.ForwardedWriteP50 = pct(direct, 50), pct(forwarded, 50)
	res.ForwardedWriteOverheadP50 = res.ForwardedWriteP50 - res.DirectWriteP50
	return nil
}

// failover kills owner with SIGKILL and times until via shows its session
// id stopped/node_lost (or, once moved, active elsewhere). It returns
// when it killed owner.
func failover(ctx context.Context, owner, via *clusterNode, id string, ttl time.Duration, res *clusterResult) (time.Time, error) {
	killed := time.Now()
	_ = syscall.Kill(owner.s.cmd.Process.Pid, syscall.SIGKILL)
	<-owner.s.exited
	for {
		s, err := via.s.c.GetSession(ctx, id)
		if err == nil && (s.StopReason == berth.StopNodeLost || s.Node != owner.id) {
			break
		}
		if time.Since(killed) > 5*ttl+10*time.Second {
			return killed, via.s.failed("failover", fmt.Errorf("session %s not stopped/node_lost %s after the kill", id, time.Since(killed)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.FailoverMs = msSince(killed)
	return killed, nil
}

// printCluster writes the cluster figures as text.
func printCluster(out io.Writer, res clusterResult, ttl time.Duration) {
	fmt.Fprintf(out, "cluster of %d nodes (lease_ttl %s) on %s, load %.2f\n", res.Nodes, ttl, res.Machine, res.Load)
	fmt.Fprintf(out, "creates across the nodes:        %.1f/s (%d, %d in flight)\n", res.CreatesPerSec, res.Creates, res.CreatesInFlight)
	fmt.Fprintf(out, "cross-node prompt → first SSE:   p50 %.2f ms  p99 %.2f ms  (same node: p50 %.2f ms)\n",
		res.CrossNodeFirstEventP50, res.CrossNodeFirstEventP99, res.LocalFirstEventP50)
	fmt.Fprintf(out, "write (rename) direct/forwarded: p50 %.2f / %.2f ms (overhead %.2f ms)\n",
		res.DirectWriteP50, res.ForwardedWriteP50, res.ForwardedWriteOverheadP50)
	fmt.Fprintf(out, "failover after SIGKILL:          %.0f ms\n", res.FailoverMs)
	fmt.Fprintf(out, "nodes' CPU time (ms):            %v\n", res.DaemonCPUMs)
	if st := res.Storage; st != nil {
		printStorage(out, st, ttl)
	}
}

// promptToFirstEvent sends prompts to a session through c and times each
// until the stream of reader delivers the turn's first event (read in a
// goroutine of its own, so an event that comes before the prompt's answer
// is timed when it came).
func promptToFirstEvent(ctx context.Context, c, reader *bclient.Client, id string, prompts int) ([]time.Duration, error) {
	s, err := reader.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := reader.StreamEvents(sctx, id, s.LastSeq)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	type seen struct {
		ev berth.Event
		at time.Time
	}
	got := make(chan seen, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(got)
		for {
			evs, err := stream.Next(sctx)
			if err != nil {
				return
			}
			now := time.Now()
			for _, ev := range evs {
				select {
				case got <- seen{ev, now}:
				case <-sctx.Done():
					return
				}
			}
		}
	}()
	defer wg.Wait()
	defer cancel()
	var out []time.Duration
	for range prompts {
		t0 := time.Now()
		r, err := c.Prompt(ctx, id, berth.PromptRequest{Text: "echo hi"})
		if err != nil {
			return nil, err
		}
		var first time.Time
		for done := false; !done; {
			sn, ok := <-got
			if !ok {
				return nil, fmt.Errorf("the stream of %s ended", id)
			}
			if sn.ev.TurnID != r.TurnID {
				continue
			}
			if first.IsZero() {
				first = sn.at
			}
			done = sn.ev.Type == berth.EventTurnEnded
		}
		out = append(out, first.Sub(t0))
	}
	return out, nil
}

// freeLoopback returns a loopback address no one listens on now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
