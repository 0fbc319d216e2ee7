package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// migrationFiles holds the schema changes, one file per version, named
// NNNN_what.sql. A released file is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// schemaFile is the schema every migration up to its version makes,
// written out (by TestTheSchemaIsTheMigrations with -update) so that a
// new store is made by one script instead of by replaying its history.
//
//go:embed schema.sql
var schemaFile string

// schemaVersionPrefix starts the first line of schema.sql, which names the
// newest migration the file is equivalent to.
const schemaVersionPrefix = "-- schema as of migration "

// schemaMigrationsDDL makes the table of the migrations a store has
// applied.
const schemaMigrationsDDL = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL
	)`

// migrate applies, in version order, every codec.Migration the database
// has not recorded in schema_migrations (a new store: schema.sql in their
// stead), all of them in one (immediate) transaction with their records:
// a failure leaves the schema as it was. Running it again on a migrated
// database does nothing.
func migrate(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	ms, err := codec.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "load store migrations")
	}
	return applyMigrations(ctx, db, ms, parseSchema(schemaFile), logger)
}

// parseSchema reads schema.sql's version line; nil when it has none, and
// the migrations are then the only way to a new store.
func parseSchema(text string) *codec.Migration {
	first, _, _ := strings.Cut(text, "\n")
	v, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(first, schemaVersionPrefix)))
	if !strings.HasPrefix(first, schemaVersionPrefix) || err != nil {
		return nil
	}
	return &codec.Migration{Version: v, Name: "schema.sql", SQL: text}
}

// applyMigrations is migrate with the migrations ms, in version order, and
// the schema they make up to some version (nil: none).
func applyMigrations(ctx context.Context, db *sql.DB, ms []codec.Migration, schema *codec.Migration, logger *slog.Logger) (err error) {
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
	if _, err := tx.ExecContext(ctx, schemaMigrationsDDL); err != nil {
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
	if newest == 0 {
		if done, err = applySchema(ctx, tx, ms, schema); err != nil {
			return err
		}
		for _, m := range done {
			applied[m.Version] = true
		}
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return berth.WrapError(berth.EInternal, err, "apply store migration %s", m.Name)
		}
		if err := recordMigration(ctx, tx, m); err != nil {
			return err
		}
		done = append(done, m)
	}
	if err := dateMigrations(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return berth.WrapError(berth.EInternal, err, "commit the store's migrations")
	}
	for _, m := range done {
		logger.Info("sqlite store: applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}

// applySchema makes a store that records no migration with schema, and
// records the migrations ms up to its version as applied; it returns
// them. It does nothing (nil) when there is no schema or its version is
// not one of ms: the migrations then make the store.
func applySchema(ctx context.Context, tx *sql.Tx, ms []codec.Migration, schema *codec.Migration) ([]codec.Migration, error) {
	if schema == nil || !slices.ContainsFunc(ms, func(m codec.Migration) bool { return m.Version == schema.Version }) {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, schema.SQL); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "apply the store's schema (schema.sql)")
	}
	var done []codec.Migration
	for _, m := range ms {
		if m.Version > schema.Version {
			break
		}
		if err := recordMigration(ctx, tx, m); err != nil {
			return nil, err
		}
		done = append(done, m)
	}
	return done, nil
}

// dateMigrations dates the migrations a store copied from the built-in
// empty one (seed.go) records undated: its first open dates them.
func dateMigrations(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) error {
	if _, err := db.ExecContext(ctx, `UPDATE schema_migrations SET applied_at = ? WHERE applied_at = ''`,
		time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return berth.WrapError(berth.EInternal, err, "date the store's migrations")
	}
	return nil
}

// recordMigration notes in schema_migrations that m is applied.
func recordMigration(ctx context.Context, tx *sql.Tx, m codec.Migration) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return berth.WrapError(berth.EInternal, err, "record store migration %s", m.Name)
	}
	return nil
}
