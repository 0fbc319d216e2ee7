package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"log/slog"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// migrationFiles holds the schema changes, one file per version, named
// NNNN_what.sql. A released file is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies, in version order, every codec.Migration the database
// has not recorded in schema_migrations, all of them in one (immediate)
// transaction with their records: a failure leaves the schema as it was,
// and a new home's schema costs one commit instead of one per file.
// Running it again on a migrated database does nothing.
func migrate(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "load store migrations")
	}
	return applyMigrations(ctx, db, ms, logger)
}

// applyMigrations is migrate with the migrations ms, in version order.
func applyMigrations(ctx context.Context, db *sql.DB, ms []codec.Migration, logger *slog.Logger) (err error) {
	// The check is inside the transaction, so two processes opening a
	// fresh file at once cannot both apply a migration.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "begin the store's migrations")
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL
	)`
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return berth.WrapError(berth.EInternal, err, "create schema_migrations")
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "read schema_migrations")
	}
	newest := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return berth.WrapError(berth.EInternal, err, "read schema_migrations")
		}
		applied[v], newest = true, max(newest, v)
	}
	if err := rows.Close(); err != nil {
		return berth.WrapError(berth.EInternal, err, "read schema_migrations")
	}
	// A database written by a newer berth may hold a schema this one
	// cannot read correctly.
	if known := ms[len(ms)-1].Version; newest > known {
		return berth.Errorf(berth.EInternal, "store schema version %d is newer than this berth knows (%d)", newest, known)
	}
	var done []codec.Migration
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return berth.WrapError(berth.EInternal, err, "apply store migration %s", m.Name)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
			return berth.WrapError(berth.EInternal, err, "record store migration %s", m.Name)
		}
		done = append(done, m)
	}
	if err := tx.Commit(); err != nil {
		return berth.WrapError(berth.EInternal, err, "commit the store's migrations")
	}
	for _, m := range done {
		logger.Info("sqlite store: applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}
