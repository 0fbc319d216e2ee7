package postgres

import (
	"context"
	"runtime"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connPool is the store's pgxpool, with the two ways the store uses it.
// pgxpool drops a connection on release when a canceled query or a failed
// commit left it busy or inside a transaction.
type connPool struct{ p *pgxpool.Pool }

// poolSize is the number of connections: reads are cheap and short, so one
// per core, at least 4 so a few slow pages cannot starve the rest.
func poolSize() int { return min(max(4, runtime.NumCPU()), 16) }

// newConnPool returns a pool of at most n connections made from cfg; it
// connects lazily.
func newConnPool(cfg *pgx.ConnConfig, n int) (*connPool, error) {
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig = cfg
	pcfg.MaxConns = int32(n)
	p, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, err
	}
	return &connPool{p: p}, nil
}

// acquire returns a connection of the pool; release gives it back.
func (p *connPool) acquire(ctx context.Context) (*pgxpool.Conn, error) { return p.p.Acquire(ctx) }

// release gives back a connection that acquire returned.
func (p *connPool) release(c *pgxpool.Conn) { c.Release() }

// with runs fn on a connection of the pool.
func (p *connPool) with(ctx context.Context, fn func(c *pgx.Conn) error) error {
	c, err := p.p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c.Conn())
}

// close waits for the connections in use to come back and closes them all.
func (p *connPool) close() { p.p.Close() }
