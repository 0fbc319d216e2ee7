// Package hooks delivers session events to the hooks the configuration names
// (docs/api.md, "Hooks"): URL hooks get a signed POST, command hooks the same
// JSON on their stdin.
//
// Delivery goes through a durable outbox in the store (berth.HookStore).
// The event log's commit callback only marks a session (Notify); a scanner
// then reads the session's committed events after its hook cursor and, in
// one transaction, enqueues a delivery for each event a hook wants and
// moves the cursor. Since the cursor only moves with the deliveries it
// covers, a daemon killed at any point between an event's commit and its
// delivery finds, at its next start, either the delivery in the outbox or
// the event after the cursor: nothing is lost. Badge changes, which are not
// events, are followed on the all-sessions change stream, their last value
// kept with the cursor.
//
// One worker per hook claims the oldest pending delivery of each session
// (never a session's next while its previous is pending: order per
// session), up to Options.Concurrency at once, and retries failures with
// exponential backoff until Options.GiveUpAfter, when the delivery becomes
// failed and the session's next one goes. A slow receiver therefore holds
// back only its own hook's deliveries, each bounded by the hook's timeout.
package hooks

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/syncx"
)

// Defaults of Options.
const (
	DefaultTimeout       = 10 * time.Second
	DefaultRetryBase     = time.Second
	DefaultRetryMax      = time.Hour
	DefaultGiveUpAfter   = 24 * time.Hour
	DefaultPollInterval  = time.Second
	DefaultConcurrency   = 16
	DefaultMaxEventBytes = 64 << 10
	DefaultKeepDelivered = 10000
	DefaultDeliveredFor  = 7 * 24 * time.Hour
	DefaultFailedFor     = 30 * 24 * time.Hour
	DefaultPruneEvery    = time.Hour
)

// Hook is one configured hook.
type Hook struct {
	// Name identifies the hook in the outbox; Index is its place in the
	// configuration.
	Name  string
	Index int
	// Events are event types and "badge:<badge>" names.
	Events []string
	// Agent and Labels filter sessions (empty: all).
	Agent  string
	Labels map[string]string
	// URL (with Secret) or Command (with Args): exactly one is set.
	URL     string
	Secret  string
	Command string
	Args    []string
	// Timeout bounds one attempt (0: DefaultTimeout).
	Timeout time.Duration
}

// Sessions is what the hooks need of the session service: a session's
// JSON for the payload and the filters, and the change stream for badges.
type Sessions interface {
	GetSession(ctx context.Context, id string) (*berth.Session, error)
	ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error)
	StreamChanges(ctx context.Context, lastEventID string) (berth.ChangeStream, error)
}

// Options configure a Service. Zero values take the defaults.
type Options struct {
	// Store is the daemon's store; it must implement berth.HookStore.
	Store berth.Store
	Hooks []Hook
	// Owner names this daemon in delivery claims (the node id).
	Owner  string
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
	// RetryBase is the pause after a first failed attempt; each further
	// failure doubles it, up to RetryMax, with ±20% jitter.
	RetryBase time.Duration
	RetryMax  time.Duration
	// GiveUpAfter is how long after its creation a delivery is retried
	// before it becomes failed.
	GiveUpAfter time.Duration
	// PollInterval is how often a worker looks for due retries.
	PollInterval time.Duration
	// Concurrency bounds the attempts in flight per hook.
	Concurrency int
	// MaxEventBytes bounds the event data a body carries: larger data is
	// replaced by {"truncated": true, "bytes": N}.
	MaxEventBytes int
	// Retention: delivered deliveries are kept DeliveredFor and at most
	// the newest KeepDelivered; failed ones FailedFor. Pruned every
	// PruneEvery.
	KeepDelivered int
	DeliveredFor  time.Duration
	FailedFor     time.Duration
	PruneEvery    time.Duration
	// Client sends URL hooks' requests (nil: one that follows no redirect).
	Client *http.Client
}

// Counters are the service's running totals, for metrics.
type Counters struct {
	Enqueued, Delivered, Retried, Failed int64
}

// Service delivers events to hooks. Its lifecycle is New → Open → Close.
type Service struct {
	o     Options
	store berth.HookStore
	log   *slog.Logger
	hooks []*hook
	// eventHooks and badgeHooks say whether any hook wants events or
	// badges at all; types are the event types some hook wants, sorted.
	eventHooks, badgeHooks bool
	types                  []string

	sess   Sessions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	opened atomic.Bool

	scan *scanner

	enqueued, delivered, retried, failed atomic.Int64
}

// hook is a configured hook and its worker's state.
type hook struct {
	Hook
	events map[string]bool
	// wake (capacity 1) tells the worker to look for work now.
	wake chan struct{}
}

// New checks the options and returns a service that does nothing until
// Open. EInvalid when the store has no outbox while hooks are configured.
func New(o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	orDefault(&o.RetryBase, DefaultRetryBase)
	orDefault(&o.RetryMax, DefaultRetryMax)
	orDefault(&o.GiveUpAfter, DefaultGiveUpAfter)
	orDefault(&o.PollInterval, DefaultPollInterval)
	orDefault(&o.DeliveredFor, DefaultDeliveredFor)
	orDefault(&o.FailedFor, DefaultFailedFor)
	orDefault(&o.PruneEvery, DefaultPruneEvery)
	orDefault(&o.Concurrency, DefaultConcurrency)
	orDefault(&o.MaxEventBytes, DefaultMaxEventBytes)
	orDefault(&o.KeepDelivered, DefaultKeepDelivered)
	if o.Client == nil {
		o.Client = newClient()
	}
	s := &Service{o: o, log: o.Logger}
	hs, ok := o.Store.(berth.HookStore)
	if !ok && len(o.Hooks) > 0 {
		return nil, berth.Errorf(berth.EInvalid, "the %s store keeps no hook deliveries", o.Store.Name())
	}
	s.store = hs
	for _, h := range o.Hooks {
		orDefault(&h.Timeout, DefaultTimeout)
		hk := &hook{Hook: h, events: map[string]bool{}, wake: make(chan struct{}, 1)}
		for _, e := range h.Events {
			hk.events[e] = true
			if isBadge(e) {
				s.badgeHooks = true
			} else if !slices.Contains(s.types, e) {
				s.eventHooks = true
				s.types = append(s.types, e)
			}
		}
		s.hooks = append(s.hooks, hk)
	}
	slices.Sort(s.types)
	s.scan = newScanner(s)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// newClient is the HTTP client of URL hooks: it follows no redirect (a
// 3xx is a failed attempt) and sends nothing but what deliver sets.
func newClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// Open starts the service over sess: it resets the cursors when no hook is
// configured (so that hooks added later begin from then; beside the
// daemon's start, on a goroutine Close waits for), otherwise sets
// those of sessions that have none, frees the claims this owner held before
// a crash, and starts the scanner, the badge watcher and one worker per
// hook. Events committed while the daemon was down are enqueued by the
// first scan.
func (s *Service) Open(ctx context.Context, sess Sessions) error {
	if s.store == nil {
		return nil
	}
	if len(s.hooks) == 0 {
		// Nothing reads the cursors until a daemon with hooks starts: the
		// write waits for no one's start (and Close waits for it, so that
		// a daemon stopped at once still leaves them reset).
		s.start(func() {
			if err := s.store.ResetHookCursors(context.WithoutCancel(ctx)); err != nil {
				s.log.Warn("hooks: cannot reset the cursors", "err", err)
			}
		})
		return nil
	}
	s.sess = sess
	if err := s.store.InitHookCursors(ctx); err != nil {
		return err
	}
	if err := s.store.ReleaseHookClaims(ctx, s.o.Owner); err != nil {
		return err
	}
	for _, h := range s.hooks {
		if h.URL != "" && h.Secret == "" {
			s.log.Warn("hooks: a URL hook without a secret: its requests are not signed", "hook", h.Name)
		}
	}
	s.opened.Store(true)
	s.start(func() { s.scan.run(s.ctx) })
	if s.eventHooks {
		// Whatever was committed before this start and not yet scanned.
		s.start(func() { s.scan.all(s.ctx) })
	}
	if s.badgeHooks {
		s.start(func() { s.watchBadges(s.ctx) })
	}
	for _, h := range s.hooks {
		s.start(func() { s.work(s.ctx, h) })
	}
	s.start(func() { s.prune(s.ctx) })
	return nil
}

// start runs fn in a goroutine Close waits for.
func (s *Service) start(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// orDefault sets an option not given (zero or less) to its default.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Close stops every goroutine: attempts in flight are cut (a command hook's
// process group is killed) and stay pending, to be retried by the next
// start. It returns ctx.Err() if ctx ends before everything stopped.
func (s *Service) Close(ctx context.Context) error {
	s.cancel()
	return syncx.Wait(ctx, &s.wg)
}

// Notify tells the service that a session's log grew. It runs on the event
// log's writer goroutine: it only marks the session and never waits.
func (s *Service) Notify(sessionID string) {
	if !s.eventHooks {
		return
	}
	s.scan.mark(sessionID)
}

// Flush enqueues the deliveries of a session's committed events now. The
// session service calls it before it deletes a session's log, so that a
// session_stopped of a deleted session is not deleted unread.
func (s *Service) Flush(ctx context.Context, sessionID string) error {
	if !s.eventHooks || !s.opened.Load() {
		return nil
	}
	s.scan.scanMu.Lock()
	defer s.scan.scanMu.Unlock()
	return s.scan.session(ctx, sessionID)
}

// Counters returns the running totals.
func (s *Service) Counters() Counters {
	return Counters{Enqueued: s.enqueued.Load(), Delivered: s.delivered.Load(), Retried: s.retried.Load(), Failed: s.failed.Load()}
}

// Hooks implements berth.HookService.
func (s *Service) Hooks() []berth.HookInfo {
	out := make([]berth.HookInfo, 0, len(s.hooks))
	for _, h := range s.hooks {
		info := berth.HookInfo{Name: h.Name, Index: h.Index, Events: append([]string{}, h.Events...), Agent: h.Agent,
			Labels: h.Labels, TimeoutMS: h.Timeout.Milliseconds()}
		if h.URL != "" {
			info.Kind, info.Target, info.Signed = "url", redactURL(h.URL), h.Secret != ""
		} else {
			info.Kind, info.Target = "command", filepath.Base(h.Command)
		}
		out = append(out, info)
	}
	return out
}

// ListDeliveries implements berth.HookService.
func (s *Service) ListDeliveries(ctx context.Context, f berth.HookDeliveryFilter) (*berth.HookDeliveryPage, error) {
	if s.store == nil {
		return &berth.HookDeliveryPage{Deliveries: []*berth.HookDelivery{}}, nil
	}
	return s.store.ListHookDeliveries(ctx, f)
}

// redactURL keeps a URL's scheme and host: its path and query often hold
// a token (a chat webhook's URL is its credential).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid url)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// isBadge reports whether an event name is a badge change.
func isBadge(e string) bool { return len(e) > 6 && e[:6] == "badge:" }

// wants reports whether h takes event name for session s.
func (h *hook) wants(name string, s *berth.Session) bool {
	if !h.events[name] {
		return false
	}
	if h.Agent != "" && s.Agent != h.Agent {
		return false
	}
	for k, v := range h.Labels {
		if got, ok := s.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// wakeAll tells every worker to look for work.
func (s *Service) wakeAll() {
	for _, h := range s.hooks {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// prune deletes old deliveries now and every PruneEvery.
func (s *Service) prune(ctx context.Context) {
	t := time.NewTicker(s.o.PruneEvery)
	defer t.Stop()
	for {
		now := s.o.Now()
		n, err := s.store.PruneHookDeliveries(ctx, now.Add(-s.o.DeliveredFor), s.o.KeepDelivered, now.Add(-s.o.FailedFor))
		if err != nil && ctx.Err() == nil {
			s.log.Warn("hooks: pruning deliveries failed", "err", err)
		} else if n > 0 {
			s.log.Debug("hooks: pruned deliveries", "count", n)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
