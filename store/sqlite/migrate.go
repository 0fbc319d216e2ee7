package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
)

// migrationFiles holds the schema changes, one file per version, named
// NNNN_what.sql. A released file is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

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
// recorded in schema_migrations; each one runs in its own transaction with
// its record, so a failure leaves the schema at the previous version.
// Running it again on a migrated database does nothing.
func migrate(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	ms, err := loadMigrations()
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
			return berth.WrapError(berth.EInternal, err, "apply store migration %s", m.name)
		}
		if applied {
			logger.Info("sqlite store: applied migration", "version", m.version, "name", m.name)
		}
	}
	// A database written by a newer berth may hold a schema this one
	// cannot read correctly.
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return berth.WrapError(berth.EInternal, err, "read schema version")
	}
	if known := ms[len(ms)-1].version; newest > known {
		return berth.Errorf(berth.EInternal, "store schema version %d is newer than this berth knows (%d)", newest, known)
	}
	return nil
}

// applyMigration runs m unless it is already recorded, and reports whether
// it ran. The check is inside the (immediate) transaction, so two processes
// opening a fresh file at once cannot both apply it.
func applyMigration(ctx context.Context, db *sql.DB, m migration) (applied bool, err error) {
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
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, err
	}
	return true, tx.Commit()
}
