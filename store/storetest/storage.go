package storetest

import (
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// testStorageSynced: a session shows no storage until SetStorageSynced;
// then its seq and time, moved forward only (an older seq changes
// nothing); UpdateSession, even with a stale or forged Storage, and a
// reopen keep it; an unknown session is ENotFound.
func testStorageSynced(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("s1", base)
	create(t, s, sess)
	if got := get(t, s, "s1"); got.Storage != nil {
		t.Fatalf("a new session shows storage %+v", got.Storage)
	}
	at := base.Add(time.Minute)
	if err := s.SetStorageSynced(ctx(t), "s1", 7, at); err != nil {
		t.Fatal(err)
	}
	want := berth.StorageSync{SyncedSeq: 7, SyncedAt: at}
	check := func(when string) {
		t.Helper()
		got := get(t, s, "s1")
		if got.Storage == nil || got.Storage.SyncedSeq != want.SyncedSeq || !got.Storage.SyncedAt.Equal(want.SyncedAt) {
			t.Fatalf("%s: storage %+v, want %+v", when, got.Storage, want)
		}
	}
	check("after 7")
	if err := s.SetStorageSynced(ctx(t), "s1", 5, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("after an older 5")
	sess.Turns++
	sess.Storage = &berth.StorageSync{SyncedSeq: 99}
	if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
		t.Fatal(err)
	}
	check("after UpdateSession")
	if err := s.SetStorageSynced(ctx(t), "s1", 9, at.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want = berth.StorageSync{SyncedSeq: 9, SyncedAt: at.Add(2 * time.Minute)}
	check("after 9")
	if err := s.SetStorageSynced(ctx(t), "nope", 1, at); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("unknown session: %v, want not_found", err)
	}
}
