package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"golang.org/x/net/netutil"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/modelstub"
)

// The upstream the gateway bench configures: the model stand-in, with a
// credential the gateway reads from the store at every call.
const (
	gwBenchUpstream   = "stub"
	gwBenchCredential = "bench-stub"
	gwBenchSecret     = "sk-bench-stub-credential"
)

// GatewayFigures are one measure taken both ways in the same run: straight
// to the model stand-in (Direct…) and through the model gateway
// (Gateway…), and what the gateway added at each percentile (Added… =
// Gateway… − Direct…), in milliseconds.
type GatewayFigures struct {
	DirectP50Ms  float64 `json:"direct_p50_ms"`
	DirectP90Ms  float64 `json:"direct_p90_ms"`
	DirectP99Ms  float64 `json:"direct_p99_ms"`
	GatewayP50Ms float64 `json:"gateway_p50_ms"`
	GatewayP90Ms float64 `json:"gateway_p90_ms"`
	GatewayP99Ms float64 `json:"gateway_p99_ms"`
	AddedP50Ms   float64 `json:"added_p50_ms"`
	AddedP90Ms   float64 `json:"added_p90_ms"`
	AddedP99Ms   float64 `json:"added_p99_ms"`
}

// GatewayResult is what `berth bench --gateway N` reports.
type GatewayResult struct {
	Machine string `json:"machine"`
	Store   string `json:"store"`
	// Calls is how many calls of each kind (JSON, streaming) were timed
	// one at a time each way; BodyBytes is each request's body.
	Calls     int `json:"calls"`
	BodyBytes int `json:"body_bytes"`
	// Call is a whole non-streaming call; FirstByte, a streaming call's
	// first byte of the answer's body.
	Call      GatewayFigures `json:"call"`
	FirstByte GatewayFigures `json:"first_byte"`
	// Streams clients, each with a session key of its own, make streaming
	// calls at once, the stand-in pausing GapMs after each event it
	// streams, so that about Streams streams are open at any time: Rounds
	// rounds of StreamCalls calls each, all straight then all through the
	// gateway (or the other way round).
	Streams          int            `json:"streams"`
	Rounds           int            `json:"rounds"`
	StreamCalls      int            `json:"stream_calls"`
	GapMs            float64        `json:"gap_ms"`
	StreamsFirstByte GatewayFigures `json:"streams_first_byte"`
	StreamsCall      GatewayFigures `json:"streams_call"`
	// StreamsUpstreamConns is how many connections the stand-in accepted
	// during the measured rounds of streams at once: [0] from the clients
	// straight, [1] from the gateway (connections reused: none).
	StreamsUpstreamConns [2]int64 `json:"streams_upstream_conns"`
	// GatewayCalls is how many calls the bench made through the gateway;
	// UpstreamCalls, how many reached the stand-in with the stored
	// credential (all of them, or the bench fails); ModelCallsCounted, how
	// many the sessions' usage counts (docs/api.md, Usage and budgets).
	GatewayCalls      int64   `json:"gateway_calls"`
	UpstreamCalls     int64   `json:"upstream_calls_with_credential"`
	ModelCallsCounted int64   `json:"model_calls_counted"`
	LoadAverage       float64 `json:"load_average"`
}

// gatewayFlags are the flags of the gateway bench.
type gatewayFlags struct {
	calls, streams, rounds, body int
	gap                          time.Duration
	storeURL, cpuProfile         string
}

// benchStub is the model stand-in as the bench serves it: it counts the
// calls that carry the stored credential and those that carry a session
// key (which the gateway must never let through), and paces its streams.
//
// An upstream runs on another machine: its own work is not the gateway's,
// but here it shares the bench's two cores, and decoding a request of 32
// KiB is most of it (half the process's CPU with 200 streams at once). So
// the stand-in makes each answer once, for the first call with that path
// and body, and plays it back to the next ones, event by event as it
// flushed them; every call's body is still read whole.
type benchStub struct {
	stub     modelstub.Server
	gap      atomic.Int64 // nanoseconds after each streamed event
	withCred atomic.Int64
	leaked   atomic.Int64
	conns    atomic.Int64 // connections accepted

	mu      sync.Mutex
	answers map[string]*recording // by path and body
}

// ServeHTTP counts the call and answers it as the stand-in does.
func (s *benchStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") == gwBenchSecret {
		s.withCred.Add(1)
	}
	if strings.Contains(r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"), "berth-gw-") {
		s.leaked.Add(1)
	}
	if gap := time.Duration(s.gap.Load()); gap > 0 {
		w = &pacedWriter{ResponseWriter: w, gap: gap}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	key := r.URL.Path + "\x00" + string(body)
	s.mu.Lock()
	rec := s.answers[key]
	s.mu.Unlock()
	if rec == nil {
		rec = &recording{header: http.Header{}, status: http.StatusOK}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.stub.ServeHTTP(rec, r)
		rec.Flush()
		s.mu.Lock()
		if s.answers == nil {
			s.answers = map[string]*recording{}
		}
		s.answers[key] = rec
		s.mu.Unlock()
	}
	rec.play(w)
}

// recording is an answer of the stand-in: its status, its headers and
// the pieces it flushed, in order.
type recording struct {
	status int
	header http.Header
	cur    []byte
	pieces [][]byte
}

func (c *recording) Header() http.Header         { return c.header }
func (c *recording) WriteHeader(status int)      { c.status = status }
func (c *recording) Write(p []byte) (int, error) { c.cur = append(c.cur, p...); return len(p), nil }

// Flush ends a piece.
func (c *recording) Flush() {
	if len(c.cur) > 0 {
		c.pieces = append(c.pieces, c.cur)
		c.cur = nil
	}
}

// play answers w as the stand-in answered: a flush after each piece.
func (c *recording) play(w http.ResponseWriter) {
	for k, v := range c.header {
		w.Header()[k] = v
	}
	w.WriteHeader(c.status)
	for _, p := range c.pieces {
		if _, err := w.Write(p); err != nil {
			return
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// pacedWriter makes the stand-in stream as a model does: a pause after
// each event it flushes.
type pacedWriter struct {
	http.ResponseWriter
	gap time.Duration
}

// Flush sends what was written, then waits as a model between tokens.
func (p *pacedWriter) Flush() {
	_ = http.NewResponseController(p.ResponseWriter).Flush()
	time.Sleep(p.gap)
}

// gwServer is an http.Server on a loopback listener, served until close.
type gwServer struct {
	srv    *http.Server
	url    string
	served chan struct{}
}

// serveLoopback serves h on a loopback port, at most maxConns connections
// at once when maxConns > 0; conns, when not nil, counts the connections
// it accepts.
func serveLoopback(h http.Handler, maxConns int, conns *atomic.Int64) (*gwServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &gwServer{url: "http://" + ln.Addr().String(), served: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}}
	if conns != nil {
		s.srv.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
	}
	if maxConns > 0 {
		ln = netutil.LimitListener(ln, maxConns)
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// close stops serving and waits for the server.
func (s *gwServer) close() {
	_ = s.srv.Close()
	<-s.served
}

// storeCredentials reads the gateway's credentials from the daemon's
// store, as the daemon's gateway does (docs/api.md, Credentials).
type storeCredentials struct{ store berth.Store }

// Credential reads the credential name from the store.
func (c storeCredentials) Credential(ctx context.Context, name string) (string, error) {
	v, err := c.store.CredentialValue(ctx, name)
	return string(v), err
}

// gwStreamCalls is how many streaming calls each client makes back to
// back in a round of streams at once.
const gwStreamCalls = 5

// gwMaxConns is the daemon's bound on its gateway listener's connections.
const gwMaxConns = 512

// runGatewayBench measures the model gateway beside the model stand-in it
// forwards to, in the same run: a daemon in this process with the stand-in
// as a [[models]] upstream whose credential is set through the API, and a
// gateway made as the daemon makes its own (gateway.New over the
// configuration's upstreams, the store's credentials, the session
// manager's admission and usage), served on a loopback port as the daemon
// serves it, with one key per stored session.
func (b *bench) runGatewayBench(ctx context.Context, fl gatewayFlags, asJSON bool, out, progress io.Writer) error {
	stub := &benchStub{}
	stubSrv, err := serveLoopback(stub, 0, &stub.conns)
	if err != nil {
		return err
	}
	defer stubSrv.close()
	home, cfg, err := tempHome("berth-bench-gw-", fl.storeURL)
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	cfg.Models = append(cfg.Models, config.Model{Name: gwBenchUpstream, Kind: string(gateway.KindAnthropic), URL: stubSrv.url,
		Credential: gwBenchCredential, Prices: config.ModelPrices{Input: 3, Output: 15}})
	d, err := b.openDaemon(ctx, daemon.Options{Home: home, Config: cfg, Logger: quietLogger().With("daemon", "bench-gateway")})
	if err != nil {
		return err
	}
	defer closeBenchDaemon(ctx, d)
	c, err := d.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.SetCredential(ctx, gwBenchCredential, "", []byte(gwBenchSecret)); err != nil {
		return err
	}
	table, err := d.Config().Upstreams()
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{Upstreams: table, Credentials: storeCredentials{d.Store()},
		Sessions: d.Manager().GatewaySessions(), Logger: quietLogger().With("bench", "gateway")})
	if err != nil {
		return err
	}
	gwSrv, err := serveLoopback(gw, gwMaxConns, nil)
	if err != nil {
		return err
	}
	var closeOnce sync.Once
	closeGateway := func() {
		closeOnce.Do(func() {
			gwSrv.close()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = gw.Close(cctx)
		})
	}
	defer closeGateway()
	sessions, keys, err := benchSessionKeys(ctx, d, gw, max(fl.streams, 1))
	if err != nil {
		return err
	}
	r := &gwRun{stub: stub, direct: stubSrv.url + "/v1/messages", via: gwSrv.url + "/" + gwBenchUpstream + "/v1/messages",
		jsonBody: anthropicBody(false, fl.body), streamBody: anthropicBody(true, fl.body)}
	res := GatewayResult{Machine: machine(), Store: d.Store().Name(), Calls: fl.calls, BodyBytes: len(r.jsonBody),
		Streams: fl.streams, Rounds: fl.rounds, StreamCalls: gwStreamCalls, GapMs: ms(fl.gap)}
	if fl.cpuProfile != "" {
		stop, err := StartCPUProfile(fl.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintf(progress, "timing %d calls and %d streams to the model stand-in, each straight and through the gateway…\n", fl.calls, fl.calls)
	if err := r.oneAtATime(ctx, keys[0], fl.calls, &res); err != nil {
		return err
	}
	if fl.streams > 0 && fl.rounds > 0 {
		fmt.Fprintf(progress, "%d rounds of %d streams at once, each straight and through the gateway…\n", fl.rounds, fl.streams)
		stub.gap.Store(int64(fl.gap))
		err := r.atOnce(ctx, keys, fl.rounds, gwStreamCalls, fl.gap, &res)
		stub.gap.Store(0)
		if err != nil {
			return err
		}
	}
	// Closed, the gateway has told the manager of every call.
	closeGateway()
	res.GatewayCalls, res.UpstreamCalls = r.viaCalls.Load(), stub.withCred.Load()
	if res.UpstreamCalls != res.GatewayCalls || stub.leaked.Load() != 0 {
		return fmt.Errorf("the stand-in saw %d calls with the stored credential and %d with a session key; the gateway forwarded %d",
			res.UpstreamCalls, stub.leaked.Load(), res.GatewayCalls)
	}
	for _, id := range sessions {
		s, err := d.Store().GetSession(ctx, id)
		if err != nil {
			return err
		}
		res.ModelCallsCounted += s.Usage.ModelCalls
	}
	res.LoadAverage = loadAverage()
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	printGatewayBench(out, res)
	return nil
}

// benchSessionKeys stores n stopped sessions, as the daemon's own store
// holds them, and registers a gateway key for each: the manager admits
// their calls and logs them as model_call events.
func benchSessionKeys(ctx context.Context, d *daemon.Daemon, gw *gateway.Gateway, n int) (sessions, keys []string, _ error) {
	sessions, keys = make([]string, n), make([]string, n)
	now := time.Now().UTC()
	for i := range n {
		s := &berth.Session{ID: ids.New("ses"), Name: "gateway-" + strconv.Itoa(i), Agent: "demo", State: berth.StateStopped,
			StopReason: berth.StopUserRequested, Workspace: d.Home(), Labels: map[string]string{},
			CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
		if err := d.Store().CreateSession(ctx, s); err != nil {
			return nil, nil, err
		}
		sessions[i], keys[i] = s.ID, gw.Register(s.ID)
	}
	return sessions, keys, nil
}

// anthropicBody is a Messages API request of at least size bytes: a
// conversation of earlier turns, then the user's "hello".
func anthropicBody(stream bool, size int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"model":"claude-bench","max_tokens":64,"stream":%t,"messages":[`, stream)
	turn := `{"role":"user","content":"a line of code\n\tand \"quotes\""},{"role":"assistant","content":"ok"},`
	const last = `{"role":"user","content":"hello"}]}`
	for sb.Len()+len(last) < size {
		sb.WriteString(turn)
	}
	sb.WriteString(last)
	return sb.String()
}

// gwRun makes the bench's calls, straight to the stand-in (direct) or
// through the gateway (via).
type gwRun struct {
	stub                 *benchStub
	direct, via          string
	jsonBody, streamBody string
	viaCalls             atomic.Int64
}

// newClient is an HTTP client of one agent: its connections kept alive.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true, IdleConnTimeout: time.Minute}}
}

// call makes one call with key, through the gateway when via, and
// returns the time to the first byte of the answer's body and to its end.
func (r *gwRun) call(ctx context.Context, client *http.Client, via, stream bool, key string) (first, total time.Duration, _ error) {
	// Straight to the stand-in, an agent sends a key of its own (the
	// stand-in counts only the stored credential).
	url, body, header := r.direct, r.jsonBody, "sk-bench-direct"
	if via {
		url, header = r.via, key
		r.viaCalls.Add(1)
	}
	if stream {
		body = r.streamBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", header)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, 0, err
	}
	first = time.Since(t0)
	_, err = io.Copy(io.Discard, resp.Body)
	total = time.Since(t0)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("POST %s: status %d", url, resp.StatusCode)
	}
	return first, total, err
}

// gwWarmup is how many unmeasured calls of each kind open the connections
// and fill the caches before a measure.
const gwWarmup = 20

// oneAtATime times n JSON calls and n streaming calls one at a time, each
// straight then through the gateway or the other way round (turn about),
// so both see the same machine.
func (r *gwRun) oneAtATime(ctx context.Context, key string, n int, res *GatewayResult) error {
	client := newClient()
	defer client.CloseIdleConnections()
	var calls, firsts [2][]time.Duration // [0] direct, [1] via the gateway
	for i := range n + gwWarmup {
		for _, stream := range []bool{false, true} {
			for j := range 2 {
				via := (i+j)%2 == 1
				first, total, err := r.call(ctx, client, via, stream, key)
				if err != nil {
					return err
				}
				if i < gwWarmup {
					continue
				}
				w := 0
				if via {
					w = 1
				}
				if stream {
					firsts[w] = append(firsts[w], first)
				} else {
					calls[w] = append(calls[w], total)
				}
			}
		}
	}
	res.Call, res.FirstByte = figures(calls[0], calls[1]), figures(firsts[0], firsts[1])
	return nil
}

// gwStreamEvents is how many events the stand-in streams in a text
// answer: a stream lasts that many gaps.
const gwStreamEvents = 6

// atOnce runs rounds in which len(keys) clients, one a key, each make
// perClient streaming calls back to back, the first after a random pause
// within one stream's length, so that about len(keys) streams are open
// at any time and calls begin at a steady rate rather than in one burst:
// each round all straight then all through the gateway, or the other way
// round (turn about), after one unmeasured round of each.
func (r *gwRun) atOnce(ctx context.Context, keys []string, rounds, perClient int, gap time.Duration, res *GatewayResult) error {
	var clients [2][]*http.Client
	for w := range clients {
		for range keys {
			clients[w] = append(clients[w], newClient())
		}
	}
	defer func() {
		for _, cs := range clients {
			for _, c := range cs {
				c.CloseIdleConnections()
			}
		}
	}()
	var calls, firsts [2][]time.Duration
	for round := range rounds + 1 {
		for j := range 2 {
			w := (round + j) % 2
			n := perClient
			if round == 0 {
				n = 1
			}
			conns := r.stub.conns.Load()
			first, total, err := r.streams(ctx, clients[w], keys, w == 1, n, gwStreamEvents*gap)
			if err != nil {
				return err
			}
			if round > 0 {
				firsts[w], calls[w] = append(firsts[w], first...), append(calls[w], total...)
				res.StreamsUpstreamConns[w] += r.stub.conns.Load() - conns
			}
		}
	}
	res.StreamsFirstByte, res.StreamsCall = figures(firsts[0], firsts[1]), figures(calls[0], calls[1])
	return nil
}

// streams has one client a key make n streaming calls back to back, all
// at once, the first after a random pause shorter than spread; it waits
// for them all.
func (r *gwRun) streams(ctx context.Context, clients []*http.Client, keys []string, via bool, n int, spread time.Duration) (first, total []time.Duration, _ error) {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i, key := range keys {
		pause := time.Duration(rand.Int64N(int64(spread) + 1))
		wg.Go(func() {
			t := time.NewTimer(pause)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var fs, ts []time.Duration
			var err error
			for range n {
				var f, d time.Duration
				if f, d, err = r.call(ctx, clients[i], via, true, key); err != nil {
					break
				}
				fs, ts = append(fs, f), append(ts, d)
			}
			mu.Lock()
			defer mu.Unlock()
			first, total = append(first, fs...), append(total, ts...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if err := cmp.Or(firstErr, ctx.Err()); err != nil {
		return nil, nil, err
	}
	return first, total, nil
}

// figures are the percentiles of direct and via, and their differences.
func figures(direct, via []time.Duration) GatewayFigures {
	f := GatewayFigures{DirectP50Ms: pct(direct, 50), DirectP90Ms: pct(direct, 90), DirectP99Ms: pct(direct, 99),
		GatewayP50Ms: pct(via, 50), GatewayP90Ms: pct(via, 90), GatewayP99Ms: pct(via, 99)}
	f.AddedP50Ms, f.AddedP90Ms, f.AddedP99Ms = f.GatewayP50Ms-f.DirectP50Ms, f.GatewayP90Ms-f.DirectP90Ms, f.GatewayP99Ms-f.DirectP99Ms
	return f
}

// The targets of issue 25 for what the gateway adds (BENCHMARKS.md, Model
// gateway), in milliseconds.
const (
	gwTargetCallP50      = 1.0
	gwTargetFirstByteP50 = 0.5
	gwTargetStreamsP99   = 5.0
)

// holds says whether added ≤ target.
func holds(added, target float64) string {
	if added <= target {
		return fmt.Sprintf("holds (≤ %.1f ms)", target)
	}
	return fmt.Sprintf("MISSED (> %.1f ms)", target)
}

// printGatewayBench writes the gateway bench's figures as a table.
func printGatewayBench(w io.Writer, r GatewayResult) {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t, "machine\t%s\n", r.Machine)
	fmt.Fprintf(t, "store\t%s\n", r.Store)
	fmt.Fprintf(t, "request body\t%d bytes\n", r.BodyBytes)
	fmt.Fprintf(t, "ms\tdirect p50\tp90\tp99\tgateway p50\tp90\tp99\tadded p50\tp90\tp99\n")
	row := func(name string, f GatewayFigures) {
		fmt.Fprintf(t, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%+.3f\t%+.3f\t%+.3f\n", name, f.DirectP50Ms, f.DirectP90Ms, f.DirectP99Ms,
			f.GatewayP50Ms, f.GatewayP90Ms, f.GatewayP99Ms, f.AddedP50Ms, f.AddedP90Ms, f.AddedP99Ms)
	}
	row(fmt.Sprintf("call (JSON), %d one at a time", r.Calls), r.Call)
	row(fmt.Sprintf("first byte (stream), %d one at a time", r.Calls), r.FirstByte)
	if r.Streams > 0 && r.Rounds > 0 {
		n := r.Rounds * r.StreamCalls
		row(fmt.Sprintf("first byte, %d streams at once, %d each", r.Streams, n), r.StreamsFirstByte)
		row(fmt.Sprintf("stream (%.0f ms gaps), %d at once, %d each", r.GapMs, r.Streams, n), r.StreamsCall)
	}
	t.Flush()
	fmt.Fprintf(w, "added to a call at p50: %s\n", holds(r.Call.AddedP50Ms, gwTargetCallP50))
	fmt.Fprintf(w, "added to the first byte at p50: %s\n", holds(r.FirstByte.AddedP50Ms, gwTargetFirstByteP50))
	if r.Streams > 0 && r.Rounds > 0 {
		fmt.Fprintf(w, "added at p99 with %d streams at once: first byte %s, call %s\n", r.Streams,
			holds(r.StreamsFirstByte.AddedP99Ms, gwTargetStreamsP99), holds(r.StreamsCall.AddedP99Ms, gwTargetStreamsP99))
	}
	if r.Streams > 0 && r.Rounds > 0 {
		fmt.Fprintf(w, "connections the stand-in accepted during the streams: %d straight, %d from the gateway\n",
			r.StreamsUpstreamConns[0], r.StreamsUpstreamConns[1])
	}
	fmt.Fprintf(w, "calls through the gateway: %d; at the stand-in with the stored credential: %d; counted in the sessions' usage: %d\n",
		r.GatewayCalls, r.UpstreamCalls, r.ModelCallsCounted)
	fmt.Fprintf(w, "load average: %.2f\n", r.LoadAverage)
}
