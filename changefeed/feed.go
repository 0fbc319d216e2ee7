// Package changefeed is the daemon-wide feed behind GET /v1/events/stream:
// a sequence of session changes numbered across the whole daemon, kept in a
// bounded ring so a reader that reconnects with Last-Event-ID resumes with
// no gap and no duplicate.
//
// Publishing never waits for a reader: it stores the change in the ring
// and wakes whoever waits. A reader copies what it has not seen (the change
// data itself is shared, built once per change) and, when the ring moved
// past it, gets a resync instead of a silent gap. Memory is bounded by the
// ring, whatever the readers do.
package changefeed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
)

// DefaultRingSize is how many recent changes a Feed keeps by default.
const DefaultRingSize = 4096

// pageSize bounds the changes one Next returns.
const pageSize = 512

// resyncMessage is what every resync event tells its client.
const resyncMessage = "the stream cannot resume from the given position: list the sessions again (GET /v1/sessions), then apply the events that follow this one"

// Feed is the daemon-wide sequence of session changes. Its methods are safe
// for concurrent use.
type Feed struct {
	epoch string

	mu   sync.Mutex
	seq  int64                 // seq of the newest change, 0 before the first
	ring []berth.SessionChange // circular; the newest at (head+n-1)%len
	head int                   // index of the oldest change held
	n    int                   // changes held
	// notify is closed and replaced on every publish: a broadcast to every
	// reader waiting for what comes next.
	notify chan struct{}
}

// New returns an empty feed that keeps the ringSize most recent changes
// (DefaultRingSize when ringSize <= 0), with a fresh random epoch.
func New(ringSize int) *Feed {
	if ringSize <= 0 {
		ringSize = DefaultRingSize
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Feed{epoch: hex.EncodeToString(b[:]), ring: make([]berth.SessionChange, ringSize),
		notify: make(chan struct{})}
}

// Epoch names this feed (this daemon process) in every change id.
func (f *Feed) Epoch() string { return f.epoch }

// Publish appends one change and returns its id. data is kept as is and
// shared with every reader: the caller must not modify it afterwards.
func (f *Feed) Publish(typ string, data json.RawMessage) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	c := berth.SessionChange{ID: f.id(f.seq), Type: typ, Data: data}
	if f.n < len(f.ring) {
		f.ring[(f.head+f.n)%len(f.ring)] = c
		f.n++
	} else {
		f.ring[f.head] = c
		f.head = (f.head + 1) % len(f.ring)
	}
	close(f.notify)
	f.notify = make(chan struct{})
	return c.ID
}

// id formats the id of the change at seq.
func (f *Feed) id(seq int64) string { return f.epoch + "-" + strconv.FormatInt(seq, 10) }

// oldestLocked returns the seq of the oldest change held (seq+1 when none).
func (f *Feed) oldestLocked() int64 { return f.seq - int64(f.n) + 1 }

// Subscribe returns a reader positioned after lastID, or at the newest
// change when lastID is "". When the feed cannot resume from lastID (another
// epoch, or changes no longer held), the reader's first change is a resync
// and it follows from there. EInvalid when lastID is malformed.
func (f *Feed) Subscribe(lastID string) (*Reader, error) {
	epoch, seq, err := ParseID(lastID)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &Reader{f: f, pos: f.seq}
	switch {
	case lastID == "":
	case epoch != f.epoch:
		r.resync = berth.ResyncRestart
	case seq > f.seq:
		// Not a position this feed ever gave: treat it as another daemon's.
		r.resync = berth.ResyncRestart
	case seq < f.oldestLocked()-1:
		r.resync = berth.ResyncTooOld
	default:
		r.pos = seq
	}
	return r, nil
}

// ParseID splits a change id into its epoch and seq; "" gives ("", 0).
func ParseID(id string) (epoch string, seq int64, err error) {
	if id == "" {
		return "", 0, nil
	}
	i := strings.LastIndexByte(id, '-')
	if i > 0 {
		seq, err = strconv.ParseInt(id[i+1:], 10, 64)
	}
	if i <= 0 || err != nil || seq < 0 {
		return "", 0, &berth.Error{Code: berth.EInvalid,
			Message: fmt.Sprintf("a position in the session stream has the form <epoch>-<seq>, not %q", truncate(id, 80)),
			Details: map[string]any{"header": "Last-Event-ID"}}
	}
	return id[:i], seq, nil
}

// truncate cuts s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Reader follows a Feed from a position on. It holds no goroutine and no
// buffer of its own: one that is not read costs nothing but its struct.
// A Reader is used by one goroutine at a time.
type Reader struct {
	f   *Feed
	pos int64 // seq of the last change returned (or skipped by a resync)
	// resync, when set, is the reason of the resync Next returns first.
	resync string
}

var _ berth.ChangeStream = (*Reader)(nil)

// Next implements berth.ChangeStream. A reader the ring moved past gets a
// resync (reason lagged) and follows from the newest change.
func (r *Reader) Next(ctx context.Context) ([]berth.SessionChange, error) {
	f := r.f
	for {
		f.mu.Lock()
		if r.resync == "" && r.pos < f.oldestLocked()-1 {
			r.resync = berth.ResyncLagged
		}
		if r.resync != "" {
			// The resync carries the newest position, so a client that
			// reconnects with it resumes right after the resync.
			r.pos = f.seq
			data, _ := json.Marshal(berth.Resync{Reason: r.resync, Message: resyncMessage})
			r.resync = ""
			c := berth.SessionChange{ID: f.id(r.pos), Type: berth.ChangeResync, Data: data}
			f.mu.Unlock()
			return []berth.SessionChange{c}, nil
		}
		if r.pos < f.seq {
			first := r.pos + 1
			count := min(f.seq-r.pos, pageSize)
			out := make([]berth.SessionChange, count)
			start := f.head + int(first-f.oldestLocked())
			for i := range out {
				out[i] = f.ring[(start+i)%len(f.ring)]
			}
			r.pos += count
			f.mu.Unlock()
			return out, nil
		}
		wait := f.notify
		f.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close implements berth.ChangeStream; a Reader holds nothing to release.
func (r *Reader) Close() {}
