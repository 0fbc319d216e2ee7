package sqlite

import (
	"errors"

	"github.com/berth-sh/berth"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// isConstraint reports whether err is an SQLite constraint violation
// (primary key, unique, not null, foreign key).
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// internal wraps an unexpected database error as EInternal; the cause stays
// in the chain (errors.Is(err, context.Canceled) still works) for the log.
func internal(err error, format string, args ...any) error {
	return berth.WrapError(berth.EInternal, err, format, args...)
}
