package codec

import (
	"math"
	"strconv"

	"github.com/berth-sh/berth"
)

// DeliveryColumns are the columns of hook_deliveries that ScanDelivery
// reads, in its order; both backends name them alike.
const DeliveryColumns = `ord, id, hook, hook_index, event, session_id, seq, state, attempts, last_error,
	next_attempt_at, created_at, delivered_at, body`

// ScanDelivery reads the DeliveryColumns of one row.
func ScanDelivery(row Row) (*berth.HookDelivery, error) {
	d := &berth.HookDelivery{}
	var next, created int64
	var delivered *int64
	if err := row.Scan(&d.Ord, &d.ID, &d.Hook, &d.HookIndex, &d.Event, &d.SessionID, &d.Seq, &d.State,
		&d.Attempts, &d.LastError, &next, &created, &delivered, &d.Body); err != nil {
		return nil, err
	}
	d.CreatedAt = FromNanos(created)
	if d.State == berth.DeliveryPending {
		at := FromNanos(next)
		d.NextAttemptAt = &at
	}
	if delivered != nil {
		at := FromNanos(*delivered)
		d.DeliveredAt = &at
	}
	return d, nil
}

// CheckDeliveries is what every store refuses of hook deliveries it is
// given to enqueue: EInvalid for one without an id, a hook, a session or
// a body.
func CheckDeliveries(ds []*berth.HookDelivery) error {
	for _, d := range ds {
		if d.ID == "" || d.Hook == "" || d.SessionID == "" || len(d.Body) == 0 {
			return berth.Errorf(berth.EInvalid, "hook delivery needs an id, a hook, a session and a body")
		}
	}
	return nil
}

// DeliveriesPage is the page of ds, read newest first with one row more
// than limit asked for: the extra row says there is a next page, which
// starts below the last delivery kept.
func DeliveriesPage(ds []*berth.HookDelivery, limit int) *berth.HookDeliveryPage {
	page := &berth.HookDeliveryPage{Deliveries: ds}
	if len(ds) > limit {
		page.Deliveries = ds[:limit]
		page.NextCursor = strconv.FormatInt(ds[limit-1].Ord, 10)
	}
	return page
}

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
