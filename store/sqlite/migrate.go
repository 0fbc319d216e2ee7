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

// migrate applies, in version order, every codec.Migration the database has not
// recorded in schema_migrations; each one runs in its own transaction with
// its record, so a failure leaves the schema at the previous version.
// Running it again on a migrated database does nothing.
func migrate(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "load store migrations")
	}
	const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL
	)`
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return berth.WrapError(berth.EInternal, err, "create schema_migrations")
	}
	for _, m := range ms {
		applied, err := applyMigration(ctx, db, m)
		if err != nil {
			return berth.WrapError(berth.EInternal, err, "apply store codec.Migration %s", m.Name)
		}
		if applied {
			logger.Info("sqlite store: applied migration", "version", m.Version, "name", m.Name)
		}
	}
	// A database written by a newer berth may hold a schema this one
	// cannot read correctly.
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return berth.WrapError(berth.EInternal, err, "read schema version")
	}
	if known := ms[len(ms)-1].Version; newest > known {
		return berth.Errorf(berth.EInternal, "store schema version %d is newer than this berth knows (%d)", newest, known)
	}
	return nil
}

// applyMigration runs m unless it is already recorded, and reports whether
// it ran. The check is inside the (immediate) transaction, so two processes
// opening a fresh file at once cannot both apply it.
func applyMigration(ctx context.Context, db *sql.DB, m codec.Migration) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, err
	}
	return true, tx.Commit()
}
