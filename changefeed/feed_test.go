package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// next reads one page with a deadline.
func next(t *testing.T, r *Reader) []berth.SessionChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// publishN publishes n updates whose data is their number.
func publishN(f *Feed, from, n int) {
	for i := from; i < from+n; i++ {
		f.Publish(berth.ChangeSessionUpdated, json.RawMessage(fmt.Sprint(i)))
	}
}

func TestResumeFromAnIDHasNoGapAndNoDuplicate(t *testing.T) {
	f := New(16)
	r, _ := f.Subscribe("")
	publishN(f, 1, 5)
	got := next(t, r)
	if len(got) != 5 || string(got[0].Data) != "1" || got[4].ID != f.Epoch()+"-5" {
		t.Fatalf("first read: %+v", got)
	}
	// A reconnection with the third id gets 4, 5 and then what follows.
	r2, err := f.Subscribe(got[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	publishN(f, 6, 1)
	got = next(t, r2)
	if len(got) != 3 || string(got[0].Data) != "4" || string(got[2].Data) != "6" {
		t.Fatalf("resumed read: %+v", got)
	}
}

func TestAPositionNoLongerKeptGivesResync(t *testing.T) {
	for _, tc := range []struct{ seq, reason string }{
		{"2", berth.ResyncTooOld},
		{"other", berth.ResyncRestart},
		{"99", berth.ResyncRestart},
	} {
		f := New(4)
		publishN(f, 1, 10)
		id := f.Epoch() + "-" + tc.seq
		if tc.seq == "other" {
			id = "0123456789abcdef-3"
		}
		r, err := f.Subscribe(id)
		if err != nil {
			t.Fatal(err)
		}
		got := next(t, r)
		var rs berth.Resync
		if len(got) != 1 || got[0].Type != berth.ChangeResync || json.Unmarshal(got[0].Data, &rs) != nil ||
			rs.Reason != tc.reason || got[0].ID != f.Epoch()+"-10" {
			t.Fatalf("%s: %+v", id, got)
		}
		publishN(f, 11, 1)
		if got = next(t, r); len(got) != 1 || string(got[0].Data) != "11" {
			t.Fatalf("%s after resync: %+v", id, got)
		}
	}
	f := New(4)
	publishN(f, 1, 10)
	// The newest kept position minus one still resumes.
	r, _ := f.Subscribe(f.Epoch() + "-6")
	if got := next(t, r); len(got) != 4 || string(got[0].Data) != "7" {
		t.Fatalf("oldest resumable: %+v", got)
	}
}

func TestAReaderTheRingPassedGetsResyncNotAGap(t *testing.T) {
	f := New(4)
	r, _ := f.Subscribe("")
	publishN(f, 1, 2)
	next(t, r)
	publishN(f, 3, 9) // the reader reads nothing meanwhile
	got := next(t, r)
	if len(got) != 1 || got[0].Type != berth.ChangeResync || got[0].ID != f.Epoch()+"-11" {
		t.Fatalf("lagged reader: %+v", got)
	}
	publishN(f, 12, 1)
	if got = next(t, r); len(got) != 1 || string(got[0].Data) != "12" {
		t.Fatalf("after resync: %+v", got)
	}
}

func TestBadIDsAreInvalid(t *testing.T) {
	f := New(4)
	for _, id := range []string{"12", "-3", "abc-", "abc-x", "abc-1x"} {
		if _, err := f.Subscribe(id); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Subscribe(%q) = %v, want invalid_argument", id, err)
		}
	}
}

func TestNextWaitsAndEndsWithItsContext(t *testing.T) {
	f := New(4)
	r, _ := f.Subscribe("")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.Next(ctx); done <- err }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Next = %v", err)
	}
}
