// Package postgres implements berth.Store on PostgreSQL, with pgx/v5 and
// its connection pool.
//
// The schema mirrors the SQLite backend (store/sqlite): a session is a JSON
// document with queryable columns beside it, labels have a table of their
// own, and each session's log is keyed by (session_pk, seq), so every page
// of events is a range of an index. AppendEvents writes a batch with COPY,
// in one transaction with the sessions' last_seq and the turns' seq ranges.
//
// Several daemons may open the same database (migrations are serialised by
// an advisory lock), but the event log writer above this store keeps
// per-session sequence numbers in memory, so one session must have one
// writer. A cluster (docs/api.md, "Cluster nodes: ownership and
// failover") makes sure of it with the node registry (node.go), the
// sessions' leases (lease.go) and fencing (fence.go): a store told its
// node refuses every write of a session whose lease that node no longer
// holds. AppendEvents announces each commit on the berth_events channel,
// which WatchEvents (watch.go) listens to, so that every node's readers
// wake up.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/berth-sh/berth/store/internal/fence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Name is the backend name Store.Name reports.
const Name = "postgres"

// defaultConnectTimeout bounds Open's first connection when
// Options.ConnectTimeout is zero.
const defaultConnectTimeout = 5 * time.Second

// Options tune a Store.
type Options struct {
	// Logger receives the store's diagnostics. nil discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds each attempt to connect to the server, and
	// Open's first connection as a whole. Zero means 5 seconds.
	ConnectTimeout time.Duration
	// CredentialKey seals the credentials (CredentialKeySize bytes, from
	// [credentials] key_file; docs/api.md, Credentials). nil: this node
	// can list and delete credentials but neither set nor read one.
	CredentialKey []byte
}

// Store is a berth.Store backed by a PostgreSQL database. It is safe for
// concurrent use.
type Store struct {
	pool   *connPool
	logger *slog.Logger
	// connCfg makes the connections outside the pool (WatchEvents').
	connCfg *pgx.ConnConfig
	// watchIdle, when set, replaces defaultWatchIdle (for tests).
	watchIdle time.Duration
	// fence is set by Fence (fence.go).
	fence fence.Book
	// sealer seals credential values; nil without a key (credential.go).
	sealer *sealer

	closeOnce sync.Once
}

var _ berth.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string), applies pending migrations and returns the store.
// EInvalid for a malformed url or options, EUnavailable when the server
// cannot be reached within the connect timeout. No error message holds the
// password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	timeout := opts.ConnectTimeout
	switch {
	case timeout < 0:
		return nil, berth.Errorf(berth.EInvalid, "postgres connect timeout must not be negative")
	case timeout == 0:
		timeout = defaultConnectTimeout
	}
	if strings.TrimSpace(url) == "" {
		return nil, berth.Errorf(berth.EInvalid, "postgres store needs a connection URL")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// The parser's message may quote the URL; keep only a redacted form.
		reason := redact(err.Error(), url)
		return nil, &berth.Error{Code: berth.EInvalid, Message: "malformed PostgreSQL URL: " + reason}
	}
	cfg.ConnectTimeout = timeout
	sealer, err := newSealer(opts.CredentialKey)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	where := serverAddr(cfg)

	// The pool connects lazily: connect and ping once, within the timeout,
	// so a wrong address fails Open instead of the first request.
	pool, err := newConnPool(cfg, poolSize())
	if err != nil {
		return nil, &berth.Error{Code: berth.EInvalid, Message: "PostgreSQL pool: " + redact(err.Error(), url)}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = pool.with(pctx, func(c *pgx.Conn) error { return c.Ping(pctx) })
	cancel()
	if err != nil {
		pool.close()
		return nil, unavailable(err, url, where)
	}
	if err := migrate(ctx, pool, logger); err != nil {
		pool.close()
		return nil, err
	}
	logger.Debug("postgres store: open", "server", where, "database", cfg.Database)
	return &Store{pool: pool, logger: logger, connCfg: cfg.Copy(), sealer: sealer}, nil
}

// unavailable is the error of a failed first connection: EUnavailable
// whose message names the server (and what it answered, if it refused the
// login) and whose cause is the redacted driver error, never the password.
// A canceled ctx stays in the chain.
func unavailable(err error, url, where string) error {
	cause := error(errors.New(redact(err.Error(), url)))
	if errors.Is(err, context.Canceled) {
		cause = context.Canceled
	}
	msg := "cannot reach PostgreSQL at " + where
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server answered: it refused the login or the database.
		msg = fmt.Sprintf("PostgreSQL at %s refused the connection: %s", where, redact(pe.Message, url))
	}
	return &berth.Error{Code: berth.EUnavailable, Message: msg, Err: cause}
}

// serverAddr names the server of a connection config, for messages.
func serverAddr(c *pgx.ConnConfig) string {
	if strings.HasPrefix(c.Host, "/") {
		return c.Host // a Unix socket directory
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// kvPassword finds the password of a key=value connection string
// (compiled when first used, not at every berth process's start).
var kvPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
})

// redact removes from msg every occurrence of the password that the
// connection string conn holds, in URL or key=value form.
func redact(msg, conn string) string {
	var secrets []string
	if _, rest, ok := strings.Cut(conn, "://"); ok {
		// userinfo ends at the last '@' before the path or query: a
		// password may itself hold '@' or '/'.
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
				secrets = append(secrets, pw)
			}
		}
	}
	for _, m := range kvPassword().FindAllStringSubmatch(conn, -1) {
		secrets = append(secrets, strings.Trim(m[1], "'"))
	}
	// The URL's query may also carry password=…
	if i := strings.Index(conn, "password="); i >= 0 {
		v := conn[i+len("password="):]
		if j := strings.IndexAny(v, "&# "); j >= 0 {
			v = v[:j]
		}
		secrets = append(secrets, v)
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

// Name reports "postgres".
func (s *Store) Name() string { return Name }

// Close waits for the connections in use to be returned and closes the
// pool. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.close)
	return nil
}

// isUniqueViolation reports whether err is a unique or primary key
// violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// internal wraps an unexpected database error as EInternal; the cause stays
// in the chain (errors.Is(err, context.Canceled) still works) for the log.
func internal(err error, format string, args ...any) error {
	return berth.WrapError(berth.EInternal, err, format, args...)
}

// inTx runs fn in a transaction and commits it if fn succeeds.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	c, err := s.pool.acquire(ctx)
	if err != nil {
		return internal(err, "acquire a connection")
	}
	defer s.pool.release(c)
	tx, err := c.Begin(ctx)
	if err != nil {
		return internal(err, "begin transaction")
	}
	if err := fn(tx); err != nil {
		// Roll back even when ctx has ended, so the connection goes back
		// to the pool clean (release drops it if that fails).
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if isUniqueViolation(err) {
			return berth.WrapError(berth.EConflict, err, "conflicting write")
		}
		return internal(err, "commit transaction")
	}
	return nil
}

// queryRow runs a query of at most one row on a pooled connection and scans
// it into dest; pgx.ErrNoRows when there is none.
func (s *Store) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	return s.pool.with(ctx, func(c *pgx.Conn) error { return c.QueryRow(ctx, sql, args...).Scan(dest...) })
}

// query runs a query on a pooled connection and calls each for every row.
func (s *Store) query(ctx context.Context, sql string, args []any, each func(rows pgx.Rows) error) error {
	return s.pool.with(ctx, func(c *pgx.Conn) error { return eachRow(ctx, c, sql, args, each) })
}

// eachRow runs a query on q and calls each for every row.
func eachRow(ctx context.Context, q querier, sql string, args []any, each func(rows pgx.Rows) error) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// collect runs a query on a pooled connection and returns what scan makes
// of each row, in order; none is an empty slice. Any failure is EInternal
// saying what failed.
func collect[T any](ctx context.Context, s *Store, what, sql string, args []any, scan func(codec.Row) (T, error)) ([]T, error) {
	out := []T{}
	err := s.query(ctx, sql, args, func(rows pgx.Rows) error {
		v, err := scan(rows)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, internal(err, "%s", what)
	}
	return out, nil
}

// collectOfSession is collect for the rows of one session: none, for a
// session that does not exist, is ENotFound.
func collectOfSession[T any](ctx context.Context, s *Store, sessionID, what, sql string, args []any, scan func(codec.Row) (T, error)) ([]T, error) {
	out, err := collect(ctx, s, what, sql, args, scan)
	if err == nil && len(out) == 0 {
		// None: tell a session without any from a missing session.
		err = s.sessionExists(ctx, sessionID)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isForeignKeyViolation reports whether err is a foreign key violation: a
// row written for a session that a concurrent DeleteSession removed.
func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}
