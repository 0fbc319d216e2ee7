package postgres

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// Two nodes on one database check the same sign-ins: one made on the
// first is found on the second, and one the second ends is ended on the
// first. The table holds the hashes it was given, nothing else.
func TestSignInsAreSharedByNodes(t *testing.T) {
	dir := t.TempDir()
	a, b := openAt(t, dir), openAt(t, dir)
	defer a.Close()
	defer b.Close()
	ctx := testenv.Context(t)
	in := berth.SignIn{ID: sha256.Sum256([]byte("cookie id")), Token: sha256.Sum256([]byte("print")),
		ExpiresAt: time.Now().Add(time.Hour)}
	if err := a.PutSignIn(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetSignIn(ctx, in.ID); err != nil || got.Token != in.Token || !got.ExpiresAt.Equal(in.ExpiresAt) {
		t.Fatalf("the second node reads %+v, %v; want %+v", got, err, in)
	}
	var id, token []byte
	if err := a.queryRow(ctx, `SELECT id, token FROM signins`, nil, &id, &token); err != nil ||
		string(id) != string(in.ID[:]) || string(token) != string(in.Token[:]) {
		t.Fatalf("kept row %x %x, %v; want the hashes given", id, token, err)
	}
	if err := b.DeleteSignIn(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetSignIn(ctx, in.ID); berth.ErrorCode(err) != berth.ENotFound {
		t.Fatalf("the first node after the second ended it: %v", err)
	}
}
