package postgres

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// notices collects what a watcher reports.
type notices struct {
	mu  sync.Mutex
	got []string // "id last", or "*" for fn("", 0)
}

// fn is the watcher's callback.
func (n *notices) fn(id string, last int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id == "" && last == 0 {
		n.got = append(n.got, "*")
		return
	}
	n.got = append(n.got, fmt.Sprintf("%s %d", id, last))
}

// snapshot returns a copy of what was reported.
func (n *notices) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// waitFor polls, until a deadline, for cond over the notices.
func (n *notices) waitFor(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := n.snapshot()
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: notices %v", what, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watch starts b.WatchEvents, waits until it listens, and returns its
// notices and a stop function that ends it and returns its error.
func watch(t *testing.T, s *Store) (*notices, func() error) {
	t.Helper()
	n := &notices{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.WatchEvents(ctx, n.fn) }()
	waitListening(t, s, 1)
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("WatchEvents did not return after its context ended")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return n, stop
}

// listenerPIDs returns the backends of the store's database that LISTEN
// on berth_events: whose LISTEN has completed (the backend is idle after
// it), so that a NOTIFY committed from now on reaches them. A backend
// still running it shows the same query, active: a notice sent then was
// missed now and then on a loaded machine.
func listenerPIDs(t *testing.T, s *Store) []int32 {
	t.Helper()
	var pids []int32
	err := s.query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+eventsChannel+`' AND state = 'idle'
		AND pid <> pg_backend_pid()`, nil,
		func(rows pgx.Rows) error {
			var pid int32
			if err := rows.Scan(&pid); err != nil {
				return err
			}
			pids = append(pids, pid)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitListening polls until n backends listen on the store's database.
func waitListening(t *testing.T, s *Store, n int) []int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := listenerPIDs(t, s)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listeners, want %d", len(pids), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// twoStores opens two stores on one test database, as two nodes would,
// closed when the test ends, and makes the active sessions ids through
// the first.
func twoStores(tb testing.TB, ids ...string) (a, b *Store) {
	tb.Helper()
	dir := tb.TempDir()
	a, b = openAt(tb, dir), openAt(tb, dir)
	tb.Cleanup(func() {
		b.Close()
		a.Close()
	})
	for _, id := range ids {
		if err := a.CreateSession(context.Background(), &berth.Session{ID: id, State: berth.StateActive}); err != nil {
			tb.Fatal(err)
		}
	}
	return a, b
}

// appendOne appends to session id of s an agent message at seq, or fails
// the test.
func appendOne(tb testing.TB, s *Store, id string, seq int64) {
	tb.Helper()
	if err := s.AppendEvents(context.Background(), []berth.Event{{SessionID: id, Seq: seq, Type: berth.EventAgentMessage}}); err != nil {
		tb.Fatal(err)
	}
}

// TestWatchEventsAcrossStores: an append committed by one store reaches
// the watcher of another (another node) as (session, last seq), in commit
// order, and a rolled-back append sends nothing.
func TestWatchEventsAcrossStores(t *testing.T) {
	a, b := twoStores(t, "s1", "s2")
	ctx := context.Background()
	n, stop := watch(t, b)
	ev := func(id string, seq int64) berth.Event {
		return berth.Event{SessionID: id, Seq: seq, Type: berth.EventAgentMessage, Time: time.Now()}
	}
	var want []string
	for seq := int64(1); seq <= 20; seq++ {
		batch := []berth.Event{ev("s1", seq)}
		want = append(want, fmt.Sprintf("s1 %d", seq))
		if seq%5 == 0 {
			// A batch of two sessions announces each.
			batch = append(batch, ev("s2", seq/5))
			want = append(want, fmt.Sprintf("s2 %d", seq/5))
		}
		if err := a.AppendEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// A refused batch (a duplicate seq) announces nothing.
	if err := a.AppendEvents(ctx, []berth.Event{ev("s1", 21), ev("s2", 1)}); berth.ErrorCode(err) != berth.EConflict {
		t.Fatalf("duplicate append: %v", err)
	}
	if err := a.AppendEvents(ctx, []berth.Event{ev("s1", 21)}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "s1 21")
	got := n.waitFor(t, "every notice", func(got []string) bool { return len(got) >= len(want) })
	// Within one commit the sessions come in id order; across commits in
	// commit order.
	if !slices.Equal(got, want) {
		t.Fatalf("notices\n got %v\nwant %v", got, want)
	}
	if err := stop(); err != context.Canceled {
		t.Fatalf("WatchEvents returned %v, want context.Canceled", err)
	}
}

// TestWatchEventsReconnects: when the listening backend is killed, the
// watcher reconnects, says "anything may have changed" once, and gets
// later notices again.
func TestWatchEventsReconnects(t *testing.T) {
	a, b := twoStores(t, "s")
	ctx := context.Background()
	n, stop := watch(t, b)
	appendOne(t, a, "s", 1)
	n.waitFor(t, "the first notice", func(got []string) bool { return slices.Equal(got, []string{"s 1"}) })

	for round := range 2 {
		pids := waitListening(t, b, 1)
		var ok bool
		if err := a.queryRow(ctx, `SELECT pg_terminate_backend($1)`, []any{pids[0]}, &ok); err != nil || !ok {
			t.Fatalf("terminate the listener %d: %v, %v", pids[0], ok, err)
		}
		stars := round + 1
		n.waitFor(t, "the reconnect's wake-all", func(got []string) bool {
			k := 0
			for _, g := range got {
				if g == "*" {
					k++
				}
			}
			return k == stars
		})
		seq := int64(round + 2)
		appendOne(t, a, "s", seq)
		got := n.waitFor(t, "a notice after the reconnect", func(got []string) bool {
			return len(got) > 0 && got[len(got)-1] == fmt.Sprintf("s %d", seq)
		})
		// One wake-all per reconnect, never more.
		if k := len(got) - len(slices.DeleteFunc(slices.Clone(got), func(g string) bool { return g == "*" })); k != stars {
			t.Fatalf("round %d: %d wake-alls in %v", round, k, got)
		}
	}
	if err := stop(); err != context.Canceled {
		t.Fatalf("WatchEvents returned %v", err)
	}
	// Its connection is gone with it.
	waitListening(t, b, 0)
}

// TestWatchEventsLeavesNothing: WatchEvents returns when its context ends,
// also while it waits to reconnect, and leaves no goroutine behind.
func TestWatchEventsLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	pgtest.ServerURL(t)
	databaseFor(t, dir) // made before the baseline, dropped after the check
	opts := goleak.IgnoreCurrent()
	func() {
		s := openAt(t, dir)
		defer s.Close()
		_, stop := watch(t, s)
		if err := stop(); err != context.Canceled {
			t.Fatalf("WatchEvents returned %v", err)
		}
		// A watcher that cannot connect retries until its context ends.
		bad := &Store{pool: s.pool, logger: s.logger, connCfg: s.connCfg.Copy()}
		bad.connCfg.Port = 1
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		calls := 0
		if err := bad.WatchEvents(ctx, func(string, int64) { calls++ }); err != context.DeadlineExceeded {
			t.Fatalf("unreachable watcher returned %v", err)
		}
		if calls != 0 {
			t.Fatalf("a watcher that never listened called fn %d times", calls)
		}
	}()
	goleak.VerifyNone(t, opts)
}

// freezer is a TCP proxy to the test server whose open connections can be
// frozen: they stay open but carry no more bytes, as across a network
// partition that neither end hears of. Connections made after a freeze
// work.
type freezer struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	frozen int // connections with an index below this carry nothing
	wg     sync.WaitGroup
}

// newFreezer proxies to target until the test ends.
func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	f.wg.Go(f.accept)
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// accept proxies every connection until the listener closes.
func (f *freezer) accept() {
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		f.mu.Lock()
		idx := len(f.conns) / 2
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		f.wg.Go(func() { f.pipe(idx, out, in) })
		f.wg.Go(func() { f.pipe(idx, in, out) })
	}
}

// pipe copies src to dst while connection idx is not frozen, and drops
// what it reads once it is.
func (f *freezer) pipe(idx int, dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		f.mu.Lock()
		frozen := idx < f.frozen
		f.mu.Unlock()
		if frozen {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// freeze freezes every connection open now.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = len(f.conns) / 2
}

// TestWatchEventsSilentPartition: when the watcher's connection goes
// silent (the network drops it without a word), the watcher's ping finds
// out, it reconnects, wakes everyone once and gets notices again.
func TestWatchEventsSilentPartition(t *testing.T) {
	a, b := twoStores(t, "s")
	ctx := context.Background()
	f := newFreezer(t, serverAddr(b.connCfg))
	host, port, _ := net.SplitHostPort(f.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	b.connCfg.Host, b.connCfg.Port, b.watchIdle = host, uint16(p), 200*time.Millisecond
	n, stop := watch(t, b)
	appendOne(t, a, "s", 1)
	n.waitFor(t, "the first notice", func(got []string) bool { return slices.Equal(got, []string{"s 1"}) })
	// Quiet past the idle period: the listener is pinged, on the same
	// connection, and nothing else happens.
	pid := listenerPIDs(t, b)[0]
	deadline := time.Now().Add(30 * time.Second)
	for {
		var q string
		if err := a.queryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`, []any{pid}, &q); err != nil {
			t.Fatalf("the listener's backend: %v", err)
		}
		if q == "-- ping" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle listener was not pinged: its last query is %q", q)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.snapshot(); !slices.Equal(got, []string{"s 1"}) {
		t.Fatalf("notices after an idle ping: %v", got)
	}
	f.freeze()
	appendOne(t, a, "s", 2) // its notice is lost in the partition
	n.waitFor(t, "the wake-all after the silent connection is found out", func(got []string) bool {
		return slices.Contains(got, "*")
	})
	appendOne(t, a, "s", 3)
	got := n.waitFor(t, "a notice on the new connection", func(got []string) bool { return slices.Contains(got, "s 3") })
	if slices.Contains(got, "s 2") && slices.Index(got, "s 2") > slices.Index(got, "*") {
		t.Fatalf("notices %v: seq 2 came through the frozen connection", got)
	}
	if err := stop(); err != context.Canceled {
		t.Fatalf("WatchEvents returned %v", err)
	}
}

// BenchmarkNotifyRoundTrip measures the time from AppendEvents on one
// store to the notice on another store's watcher (what a node's SSE
// reader waits for when another node commits), and reports its p50 and
// p99. Run it with -benchtime=1000x.
func BenchmarkNotifyRoundTrip(b *testing.B) {
	a, w := twoStores(b, "s")
	ctx := context.Background()
	seen := make(chan int64, 16)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.WatchEvents(wctx, func(id string, last int64) {
			if id == "s" {
				seen <- last
			}
		})
	}()
	defer func() { cancel(); <-done }()
	// Wait until the watcher listens: the first notice that arrives.
	seq := int64(0)
	for ready := false; !ready; {
		seq++
		if err := a.AppendEvents(ctx, []berth.Event{{SessionID: "s", Seq: seq, Type: berth.EventAgentMessage}}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-seen:
			ready = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	for len(seen) > 0 {
		<-seen
	}
	// lat is append start → notice; after is the append's return → notice
	// (0 when the notice came first): what the notice adds to the commit.
	lat := make([]time.Duration, 0, b.N)
	after := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		seq++
		start := time.Now()
		if err := a.AppendEvents(ctx, []berth.Event{{SessionID: "s", Seq: seq, Type: berth.EventAgentMessage,
			Time: start, Data: []byte(`{"text":"x"}`)}}); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		for last := <-seen; last != seq; last = <-seen {
		}
		now := time.Now()
		lat, after = append(lat, now.Sub(start)), append(after, now.Sub(committed))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p int) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)*p/100].Microseconds())
	}
	b.ReportMetric(pct(lat, 50), "p50-µs")
	b.ReportMetric(pct(lat, 99), "p99-µs")
	b.ReportMetric(pct(after, 50), "p50-after-commit-µs")
	b.ReportMetric(pct(after, 99), "p99-after-commit-µs")
}
