package postgres

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The page reads (ListEvents, ListSessions) decode their columns from
// rows.RawValues instead of rows.Scan: Scan allocates every string, every
// []byte and every *int64 of every row, 8,000 allocations and half the
// client's time for a page of 1000 events. RawValues are only valid until
// the next rows.Next, so whatever outlives the row is copied, once.

// rawInt8 decodes a BIGINT column value in the format the server sent it:
// binary (what pgx asks for a cached statement) or text.
func rawInt8(fd pgconn.FieldDescription, raw []byte) (int64, error) {
	if fd.Format == pgx.BinaryFormatCode {
		if len(raw) != 8 {
			return 0, fmt.Errorf("column %s: binary int8 value of %d bytes", fd.Name, len(raw))
		}
		return int64(binary.BigEndian.Uint64(raw)), nil
	}
	return strconv.ParseInt(string(raw), 10, 64)
}

// rawFloat8 decodes a DOUBLE PRECISION column value as rawInt8 does a
// BIGINT.
func rawFloat8(fd pgconn.FieldDescription, raw []byte) (float64, error) {
	if fd.Format == pgx.BinaryFormatCode {
		if len(raw) != 8 {
			return 0, fmt.Errorf("column %s: binary float8 value of %d bytes", fd.Name, len(raw))
		}
		return math.Float64frombits(binary.BigEndian.Uint64(raw)), nil
	}
	return strconv.ParseFloat(string(raw), 64)
}

// rawUsage decodes the columns of codec.UsageColumns, the row's from
// first on, into r.
func rawUsage(fds []pgconn.FieldDescription, raw [][]byte, first int, r *codec.UsageRow) error {
	for i, t := range r.Targets() {
		var err error
		switch t := t.(type) {
		case *int64:
			*t, err = rawInt8(fds[first+i], raw[first+i])
		case *float64:
			*t, err = rawFloat8(fds[first+i], raw[first+i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// interned turns the bytes of a column into a string, reusing last when it
// is equal: a page's turn ids and types repeat row after row, and the
// comparison does not allocate.
func interned(last *string, raw []byte) string {
	if string(raw) != *last {
		*last = string(raw)
	}
	return *last
}

// maxSlabChunk bounds the blocks byteSlab carves values out of: small
// enough that one event kept alive pins little memory, large enough that a
// page of 1000 small events takes a handful of allocations, not 1000.
const maxSlabChunk = 16 << 10

// byteSlab copies many small values into few allocations.
type byteSlab struct{ buf []byte }

// copy returns a copy of b whose capacity ends with it, so that appending
// to it never writes over the next value. An empty b gives an empty,
// non-nil slice.
func (s *byteSlab) copy(b []byte) []byte {
	if len(b) > maxSlabChunk/4 {
		// Large values get their own allocation.
		return append(make([]byte, 0, len(b)), b...)
	}
	if s.buf == nil || cap(s.buf)-len(s.buf) < len(b) {
		// Blocks start small, for the short pages of a tail, and double.
		size := min(max(2*cap(s.buf), 1<<10), maxSlabChunk)
		s.buf = make([]byte, 0, max(size, len(b)))
	}
	start := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[start:len(s.buf):len(s.buf)]
}
