package eventlog

import "github.com/berth-sh/berth"

// ring keeps the most recent events of one session, contiguous in seq, for
// live readers: at most size events and, when maxBytes is set, at most
// maxBytes of their data (an event larger than that is not kept at all:
// readers get it from the store). Its buffer grows on demand up to size,
// so a session with few events costs little.
type ring struct {
	size     int
	maxBytes int
	buf      []berth.Event
	head     int // index of the oldest event
	n        int
	bytes    int // data bytes of the events held
}

// at returns the i-th oldest event held.
func (r *ring) at(i int) *berth.Event { return &r.buf[(r.head+i)%len(r.buf)] }

// push adds events that directly follow the newest one held.
func (r *ring) push(evs []berth.Event) {
	// Only the newest size events can stay.
	if len(evs) > r.size {
		r.reset()
		evs = evs[len(evs)-r.size:]
	}
	for _, e := range evs {
		if r.n == r.size {
			r.dropOldest()
		}
		if r.n == len(r.buf) {
			r.grow()
		}
		r.buf[(r.head+r.n)%len(r.buf)] = e
		r.n++
		r.bytes += len(e.Data)
		for r.maxBytes > 0 && r.bytes > r.maxBytes && r.n > 0 {
			r.dropOldest()
		}
	}
}

// grow makes room for more events, up to size, keeping them in order.
func (r *ring) grow() {
	buf := make([]berth.Event, min(r.size, max(2*len(r.buf), 16)))
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// dropOldest forgets the oldest event, letting its data go.
func (r *ring) dropOldest() {
	e := &r.buf[r.head]
	r.bytes -= len(e.Data)
	*e = berth.Event{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// last returns the seq of the newest event held, 0 when empty.
func (r *ring) last() int64 {
	if r.n == 0 {
		return 0
	}
	return r.at(r.n - 1).Seq
}

// after returns a copy of at most limit events from seq pos+1 on, or nil
// when the ring does not hold pos+1.
func (r *ring) after(pos int64, limit int) []berth.Event {
	if r.n == 0 {
		return nil
	}
	first := r.at(0).Seq
	if pos+1 < first || pos+1 > r.last() {
		return nil
	}
	i := int(pos + 1 - first)
	out := make([]berth.Event, min(r.n-i, limit))
	for j := range out {
		out[j] = *r.at(i + j)
	}
	return out
}

// reset drops every event and the buffer.
func (r *ring) reset() {
	r.buf, r.head, r.n, r.bytes = nil, 0, 0, 0
}
