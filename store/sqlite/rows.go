package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// querier runs queries: a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// eachRow runs query q on db and calls each for every row. A coded error
// of each is returned as is; any other failure is EInternal saying what
// failed.
func eachRow(ctx context.Context, db querier, what, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return internal(err, "%s", what)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			if _, ok := errors.AsType[*berth.Error](err); ok {
				return err
			}
			return internal(err, "%s", what)
		}
	}
	if err := rows.Err(); err != nil {
		return internal(err, "%s", what)
	}
	return nil
}

// collect runs query q on db and returns what scan makes of each row, in
// order; none is an empty slice. Errors are eachRow's.
func collect[T any](ctx context.Context, db querier, what, q string, args []any, scan func(codec.Row) (T, error)) ([]T, error) {
	out := []T{}
	err := eachRow(ctx, db, what, q, args, func(rows *sql.Rows) error {
		v, err := scan(rows)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
