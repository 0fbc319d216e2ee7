package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
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

// migrate applies, in version order, every codec.Migration the database has not
// recorded in schema_migrations, all in one transaction that first takes
// an advisory lock: two daemons starting together apply each migration
// once, and a failure leaves the schema as it was. Running it again on a
// migrated database does nothing. A database whose schema is newer than
// this berth knows is refused.
func migrate(ctx context.Context, pool *connPool, logger *slog.Logger) error {
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "load store migrations")
	}
	var applied []codec.Migration
	err = pool.with(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
				return fmt.Errorf("take the codec.Migration lock: %w", err)
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
			if known := ms[len(ms)-1].Version; newest > known {
				return berth.Errorf(berth.EInternal, "store schema version %d is newer than this berth knows (%d)", newest, known)
			}
			for _, m := range ms {
				if done[m.Version] {
					continue
				}
				// No arguments: pgx sends the file with the simple protocol,
				// which runs several statements.
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return fmt.Errorf("apply store codec.Migration %s: %w", m.Name, err)
				}
				if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
					return fmt.Errorf("record store codec.Migration %s: %w", m.Name, err)
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
		logger.Info("postgres store: applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}
