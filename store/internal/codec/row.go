package codec

import (
	"database/sql"
	"errors"

	"github.com/berth-sh/berth"
)

// Row is one row as a driver reads it: *sql.Row, *sql.Rows and pgx's rows
// all are one. It is an alias, so that a scanner of either backend and
// codec's fit the same function type.
type Row = interface{ Scan(dest ...any) error }

// OneRow sorts out the error of a read of one row that must be there: nil
// when it was, ENotFound with the message format makes when there was no
// row (sql.ErrNoRows, which pgx's ErrNoRows matches too), and EInternal
// saying what failed for any other error.
func OneRow(err error, what, format string, args ...any) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return berth.Errorf(berth.ENotFound, format, args...)
	default:
		return berth.WrapError(berth.EInternal, err, "%s", what)
	}
}

// Found sorts out the error of a read of one row that may be missing:
// whether there was one, and EInternal saying what failed for an error
// other than no row.
func Found(err error, what string) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, berth.WrapError(berth.EInternal, err, "%s", what)
	}
}
