package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// signIn returns a sign-in whose hashes are made of name, expiring at exp.
func signIn(name string, exp time.Time) berth.SignIn {
	return berth.SignIn{ID: sha256.Sum256([]byte("id " + name)), Token: sha256.Sum256([]byte("token " + name)), ExpiresAt: exp}
}

// testSignIns keeps, reads and ends sign-ins: a read gives back what was
// kept to the nanosecond, expired or not; an id is kept once; ending one
// that is not kept is no error.
func testSignIns(t *testing.T, open Opener) {
	s := fresh(t, open)
	live, past := signIn("live", base.Add(time.Hour)), signIn("past", base.Add(-time.Hour))
	for _, in := range []berth.SignIn{live, past} {
		if err := s.PutSignIn(ctx(t), in); err != nil {
			t.Fatalf("put %v: %v", in.ExpiresAt, err)
		}
	}
	for _, want := range []berth.SignIn{live, past} {
		got, err := s.GetSignIn(ctx(t), want.ID)
		if err != nil || got.ID != want.ID || got.Token != want.Token || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Fatalf("get = %+v, %v; want %+v", got, err, want)
		}
	}
	again := live
	again.Token = sha256.Sum256([]byte("another token"))
	wantCode(t, s.PutSignIn(ctx(t), again), berth.EConflict)
	if got, _ := s.GetSignIn(ctx(t), live.ID); got.Token != live.Token {
		t.Fatalf("a refused put changed the kept sign-in: %+v", got)
	}
	_, err := s.GetSignIn(ctx(t), signIn("never", base).ID)
	wantCode(t, err, berth.ENotFound)
	wantCode(t, s.PutSignIn(ctx(t), signIn("zero", time.Time{})), berth.EInvalid)
	_, err = s.GetSignIn(ctx(t), signIn("zero", base).ID)
	wantCode(t, err, berth.ENotFound)

	if err := s.DeleteSignIn(ctx(t), live.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetSignIn(ctx(t), live.ID)
	wantCode(t, err, berth.ENotFound)
	if err := s.DeleteSignIn(ctx(t), live.ID); err != nil {
		t.Fatalf("ending a sign-in that is not kept: %v", err)
	}
	if _, err := s.GetSignIn(ctx(t), past.ID); err != nil {
		t.Fatalf("ending one sign-in ended another: %v", err)
	}
}

// testSignInsSweep removes expired sign-ins, at most the limit at a time,
// and never a live one; the expiry itself counts as expired.
func testSignInsSweep(t *testing.T, open Opener) {
	s := fresh(t, open)
	now := base
	expired := []berth.SignIn{signIn("a", now.Add(-3*time.Hour)), signIn("b", now.Add(-time.Minute)), signIn("c", now)}
	live := []berth.SignIn{signIn("d", now.Add(time.Nanosecond)), signIn("e", now.Add(time.Hour))}
	for _, in := range append(append([]berth.SignIn{}, expired...), live...) {
		if err := s.PutSignIn(ctx(t), in); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.DeleteExpiredSignIns(ctx(t), now, 0)
	wantCode(t, err, berth.EInvalid)
	for _, want := range []int{2, 1, 0} {
		if n, err := s.DeleteExpiredSignIns(ctx(t), now, 2); err != nil || n != want {
			t.Fatalf("sweep = %d, %v; want %d", n, err, want)
		}
	}
	for _, in := range expired {
		_, err := s.GetSignIn(ctx(t), in.ID)
		wantCode(t, err, berth.ENotFound)
	}
	for _, in := range live {
		if _, err := s.GetSignIn(ctx(t), in.ID); err != nil {
			t.Fatalf("the sweep removed a live sign-in (expires %v): %v", in.ExpiresAt, err)
		}
	}
}

// testSignInsReopen finds a sign-in again in a reopened store: what a
// restarted daemon checks a browser's cookie against.
func testSignInsReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	want := signIn("kept", base.Add(12*time.Hour))
	if err := s.PutSignIn(ctx(t), want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got, err := s.GetSignIn(ctx(t), want.ID)
	if err != nil || got.Token != want.Token || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("reopened: %+v, %v; want %+v", got, err, want)
	}
}
