package codec

import (
	"math"
	"time"

	"github.com/berth-sh/berth"
)

// Times are stored as unix nanoseconds, which keeps them exact and sortable
// in an integer column. int64 nanoseconds cover the years 1678 to 2262.
var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// ToNanos returns t as unix nanoseconds; ok is false for the zero time and
// for times int64 nanoseconds cannot hold.
func ToNanos(t time.Time) (n int64, ok bool) {
	if t.IsZero() || t.Before(minNanosTime) || t.After(maxNanosTime) {
		return 0, false
	}
	return t.UnixNano(), true
}

// SortNanos is ToNanos for an ordering column: the zero time sorts as 0 and
// out-of-range times clamp to the nearest bound.
func SortNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// FromNanos is the inverse of ToNanos, in UTC.
func FromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// LeaseTimes checks a lease asked for by owner at now for ttl and returns
// now and its expiry in unix nanoseconds. EInvalid for an empty owner, a
// ttl that is not positive or times out of range.
func LeaseTimes(owner string, now time.Time, ttl time.Duration) (at, until int64, err error) {
	if owner == "" {
		return 0, 0, berth.Errorf(berth.EInvalid, "lease owner must not be empty")
	}
	return renewal(now, ttl, "lease time")
}

// renewal checks a renewal at now for ttl and returns now and now+ttl in
// unix nanoseconds. EInvalid for a ttl that is not positive, or, naming
// the time by what, for times out of range.
func renewal(now time.Time, ttl time.Duration, what string) (at, until int64, err error) {
	if ttl <= 0 {
		return 0, 0, berth.Errorf(berth.EInvalid, "lease ttl must be positive")
	}
	at, ok := ToNanos(now)
	until, okUntil := ToNanos(now.Add(ttl))
	if !ok || !okUntil {
		return 0, 0, berth.Errorf(berth.EInvalid, "%s out of range", what)
	}
	return at, until, nil
}

// NanosArg is the stored form of a time column that may be empty: unix
// nanoseconds, or nil (NULL) for the zero time. EInvalid, naming the time
// by what, for a time int64 nanoseconds cannot hold, which would not read
// back.
func NanosArg(t time.Time, what string) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	n, ok := ToNanos(t)
	if !ok {
		return nil, berth.Errorf(berth.EInvalid, "%s out of range", what)
	}
	return n, nil
}

// FromNullNanos is the inverse of NanosArg: the zero time for NULL.
func FromNullNanos(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return FromNanos(*n)
}
