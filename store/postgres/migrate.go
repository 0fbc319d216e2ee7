package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/jackc/pgx/v5"
)

// migrationFiles holds the schema changes, one file per version, named
// NNNN_what.sql. A released file is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_xact_lock key that serialises
// migrations of daemons opening the same database at once ("berthmig").
const migrationLockKey int64 = 0x626572_74686d69

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || path.Ext(name) != ".sql" {
			return nil, fmt.Errorf("migration %q is not named NNNN_name.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies, in version order, every migration the database has not
// recorded in schema_migrations, all in one transaction that first takes
// an advisory lock: two daemons starting together apply each migration
// once, and a failure leaves the schema as it was. Running it again on a
// migrated database does nothing. A database whose schema is newer than
// this berth knows is refused.
func migrate(ctx context.Context, pool *connPool, logger *slog.Logger) error {
	ms, err := loadMigrations()
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "load store migrations")
	}
	var applied []migration
	err = pool.with(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
				return fmt.Errorf("take the migration lock: %w", err)
			}
			// Created under the lock: concurrent CREATE TABLE IF NOT EXISTS can
			// otherwise fail on the catalog's unique index.
			const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER     NOT NULL PRIMARY KEY,
			name       TEXT        NOT NULL,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
		)`
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
			done := map[int]bool{}
			rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
			if err != nil {
				return err
			}
			versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				return fmt.Errorf("read schema_migrations: %w", err)
			}
			newest := 0
			for _, v := range versions {
				done[int(v)] = true
				newest = max(newest, int(v))
			}
			if known := ms[len(ms)-1].version; newest > known {
				return berth.Errorf(berth.EInternal, "store schema version %d is newer than this berth knows (%d)", newest, known)
			}
			for _, m := range ms {
				if done[m.version] {
					continue
				}
				// No arguments: pgx sends the file with the simple protocol,
				// which runs several statements.
				if _, err := tx.Exec(ctx, m.sql); err != nil {
					return fmt.Errorf("apply store migration %s: %w", m.name, err)
				}
				if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
					return fmt.Errorf("record store migration %s: %w", m.name, err)
				}
				applied = append(applied, m)
			}
			return nil
		})
	})
	if err != nil {
		var be *berth.Error
		if errors.As(err, &be) {
			return err
		}
		return berth.WrapError(berth.EInternal, err, "migrate the store schema")
	}
	for _, m := range applied {
		logger.Info("postgres store: applied migration", "version", m.version, "name", m.name)
	}
	return nil
}
