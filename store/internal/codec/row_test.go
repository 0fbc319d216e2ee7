package codec

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-sh/berth"
)

// Both drivers' "no row" reads as missing, any other failure as internal,
// and a row as found.
func TestOneRowAndFound(t *testing.T) {
	broken := errors.New("connection reset")
	cases := []struct {
		err   error
		code  string
		found bool
	}{
		{nil, "", true},
		{sql.ErrNoRows, berth.ENotFound, false},
		{pgx.ErrNoRows, berth.ENotFound, false},
		{fmt.Errorf("scan: %w", sql.ErrNoRows), berth.ENotFound, false},
		{broken, berth.EInternal, false},
	}
	for _, c := range cases {
		err := OneRow(c.err, "read x", "session %s not found", "ses_a")
		if berth.ErrorCode(err) != c.code {
			t.Errorf("OneRow(%v) = %v, want code %q", c.err, err, c.code)
		}
		if c.code == berth.ENotFound && berth.ErrorMessage(err) != "session ses_a not found" {
			t.Errorf("OneRow(%v) says %q", c.err, err)
		}
		found, err := Found(c.err, "read x")
		if want := c.code == berth.EInternal; found != c.found || (err != nil) != want {
			t.Errorf("Found(%v) = %v, %v", c.err, found, err)
		}
	}
	if err := OneRow(broken, "read x", "missing"); !errors.Is(err, broken) {
		t.Errorf("the cause is lost: %v", err)
	}
}

func TestNanosArg(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 7, time.UTC)
	v, err := NanosArg(at, "t")
	if err != nil || v != at.UnixNano() {
		t.Fatalf("NanosArg = %v, %v", v, err)
	}
	n := v.(int64)
	if got := FromNullNanos(&n); !got.Equal(at) {
		t.Fatalf("FromNullNanos = %v, want %v", got, at)
	}
	if v, err := NanosArg(time.Time{}, "t"); v != nil || err != nil {
		t.Fatalf("the zero time: %v, %v; want NULL", v, err)
	}
	if got := FromNullNanos(nil); !got.IsZero() {
		t.Fatalf("NULL reads as %v", got)
	}
	if _, err := NanosArg(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "the entry's time"); !berth.IsCode(err, berth.EInvalid) ||
		berth.ErrorMessage(err) != "the entry's time out of range" {
		t.Fatalf("a time past 2262: %v", err)
	}
}
