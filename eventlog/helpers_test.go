package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quiet drops log output.
var quiet = slog.New(slog.DiscardHandler)

// timeout bounds every test's waiting, so a deadlock fails instead of hangs.
const timeout = 2 * time.Minute

// testCtx returns the context of a test: it ends with the test or after
// testenv.ContextTimeout, and is made once per test.
func testCtx(t testing.TB) context.Context { return testenv.Context(t) }

// openStore opens a sqlite store in dir, closed when the test ends.
func openStore(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "berth.db"), sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore opens a fresh store holding the given sessions.
func newStore(t testing.TB, ids ...string) *sqlite.Store {
	t.Helper()
	s := openStore(t, t.TempDir())
	createSessions(t, s, ids...)
	return s
}

// createSessions stores sessions with the given ids.
func createSessions(t testing.TB, s berth.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		sess := &berth.Session{ID: id, Agent: "test", State: berth.StateActive, CreatedAt: time.Now()}
		if err := s.CreateSession(context.Background(), sess); err != nil {
			t.Fatal(err)
		}
	}
}

// appendN appends events 0 to n-1 of session id to l (Append: queued), or
// fails the test.
func appendN(t testing.TB, l *Log, id string, n int) {
	t.Helper()
	for i := range n {
		if err := l.Append(testCtx(t), msg(id, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// startLog opens a Log over store with opts (a quiet logger unless opts
// has one); the test closes it itself.
func startLog(t testing.TB, store berth.Store, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l := New(store, opts)
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	return l
}

// openLog starts a log over store; the test's end closes it.
func openLog(t testing.TB, store berth.Store, opts Options) *Log {
	t.Helper()
	l := startLog(t, store, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("close log: %v", err)
		}
	})
	return l
}

// ev is an event of a session whose data records who produced it.
func ev(session, typ string, producer, i int) berth.Event {
	return berth.NewEvent(session, "", typ, map[string]int{"p": producer, "i": i})
}

// msg is an agent_message event numbered i.
func msg(session string, i int) berth.Event { return ev(session, berth.EventAgentMessage, 0, i) }

// stored reads a session's whole log from the store.
func stored(t testing.TB, s berth.Store, id string) []berth.Event {
	t.Helper()
	var all []berth.Event
	for after := int64(0); ; {
		page, err := s.ListEvents(context.Background(), id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
}

// contiguous fails the test unless evs have seqs 1..len(evs).
func contiguous(t testing.TB, evs []berth.Event) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

// readAll reads a stream until it ends and returns what it read and why it
// ended.
func readAll(ctx context.Context, st berth.EventStream) ([]berth.Event, error) {
	var all []berth.Event
	for {
		evs, err := st.Next(ctx)
		all = append(all, evs...)
		if err != nil {
			return all, err
		}
	}
}

// wantEOF fails the test unless err is io.EOF.
func wantEOF(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want io.EOF", err)
	}
}

// wantCode fails the test unless err carries code.
func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := berth.ErrorCode(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

// payload decodes the producer and number of an event made by ev.
func payload(t testing.TB, e berth.Event) (producer, i int) {
	var d struct{ P, I int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %d data %s: %v", e.Seq, e.Data, err)
	}
	return d.P, d.I
}

// hookStore wraps a store: before runs ahead of every AppendEvents (it may
// block or fail it); the sizes of committed batches and the number of
// LastSeq calls are recorded.
type hookStore struct {
	berth.Store
	before func(evs []berth.Event) error

	mu      sync.Mutex
	batches []int
	loads   int // LastSeq calls
}

// LastSeq implements berth.Store.
func (h *hookStore) LastSeq(ctx context.Context, id string) (int64, error) {
	h.mu.Lock()
	h.loads++
	h.mu.Unlock()
	return h.Store.LastSeq(ctx, id)
}

// lastSeqCalls returns how often LastSeq was called.
func (h *hookStore) lastSeqCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loads
}

// newHookStore wraps s.
func newHookStore(s berth.Store) *hookStore {
	return &hookStore{Store: s}
}

// AppendEvents implements berth.Store.
func (h *hookStore) AppendEvents(ctx context.Context, evs []berth.Event) error {
	if h.before != nil {
		if err := h.before(evs); err != nil {
			return err
		}
	}
	if err := h.Store.AppendEvents(ctx, evs); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, len(evs))
	return nil
}

// batchSizes returns the sizes of the committed batches.
func (h *hookStore) batchSizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.batches...)
}

// gate blocks AppendEvents calls until opened; entered reports each call
// that reached it.
type gate struct {
	open    chan struct{}
	entered chan int
}

// gatedStore is a store with sessions ids whose appends wait at g.
func gatedStore(t testing.TB, ids ...string) (store *hookStore, g *gate) {
	store, g = newHookStore(newStore(t, ids...)), newGate()
	store.before = g.hook
	return store, g
}

// newGate returns a closed gate.
func newGate() *gate { return &gate{open: make(chan struct{}), entered: make(chan int, 1024)} }

// hook is a hookStore.before that waits at the gate.
func (g *gate) hook(evs []berth.Event) error {
	g.entered <- len(evs)
	<-g.open
	return nil
}

// release lets every call through, now and later.
func (g *gate) release() { close(g.open) }

// ids returns n session ids.
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%02d", i)
	}
	return out
}

// raceEnabled is set by race_test.go when the race detector is on.
var raceEnabled bool

// scale shrinks a load under the race detector, which slows the pure-Go
// SQLite by an order of magnitude.
func scale(n int) int {
	if raceEnabled && os.Getenv("EVENTLOG_FULL") == "" {
		return n / 10
	}
	return n
}
