package codec

import (
	"math"
	"strconv"

	"github.com/berth-sh/berth"
)

// DeliveryPage checks a hook delivery filter and returns its page size and
// the exclusive upper bound of ord it starts below. EInvalid for a bad
// state or cursor.
func DeliveryPage(f berth.HookDeliveryFilter) (limit int, before int64, err error) {
	switch f.State {
	case "", berth.DeliveryPending, berth.DeliveryDelivered, berth.DeliveryFailed:
	default:
		return 0, 0, berth.Errorf(berth.EInvalid, "delivery state must be pending, failed or delivered, not %q", f.State)
	}
	limit = f.Limit
	switch {
	case limit <= 0:
		limit = berth.DefaultEventLimit
	case limit > berth.MaxEventLimit:
		limit = berth.MaxEventLimit
	}
	before = math.MaxInt64
	if f.Cursor != "" {
		n, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, berth.Errorf(berth.EInvalid, "malformed cursor")
		}
		before = n
	}
	return limit, before, nil
}
