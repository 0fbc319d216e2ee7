package fence

import (
	"fmt"
	"testing"

	"github.com/berth-sh/berth"
)

// leases is a lease table for Check: session id → owner and token.
type leases map[string]struct {
	owner string
	token int64
}

func (l leases) get(id string) (string, int64, bool) {
	r, ok := l[id]
	return r.owner, r.token, ok
}

// verdict is Check's answer as a string: "ok" or the sessions fenced out.
func verdict(b *Book, l leases, ids ...string) string {
	err := b.Check(ids, l.get)
	if err == nil {
		return "ok"
	}
	if berth.ErrorCode(err) != berth.ELeaseLost {
		return "wrong code: " + err.Error()
	}
	return fmt.Sprint(berth.ErrorDetails(err)["sessions"])
}

func TestBook(t *testing.T) {
	var b Book
	l := leases{"s": {"A", 3}, "t": {"A", 4}, "u": {"B", 5}}
	if got := verdict(&b, l, "s", "u", "none"); got != "ok" {
		t.Fatalf("an unfenced book checks: %s", got)
	}
	b.Fence("A")
	if got := verdict(&b, l, "s"); got != "[s]" {
		t.Fatalf("a lease never acquired here passes: %s", got)
	}
	b.Acquired("s", "A", 3)
	b.Acquired("t", "A", 4)
	b.Acquired("u", "B", 5) // another node's: not remembered
	if got := verdict(&b, l, "s", "t"); got != "ok" {
		t.Fatalf("held leases: %s", got)
	}
	if got := verdict(&b, l, "u", "t", "s", "u"); got != "[u]" {
		t.Fatalf("another node's lease: %s", got)
	}
	// Taken over: a new owner or a new token.
	l["s"] = struct {
		owner string
		token int64
	}{"B", 6}
	if got := verdict(&b, l, "t", "s"); got != "[s]" {
		t.Fatalf("a lease taken over: %s", got)
	}
	b.Released("t", "A")
	if got := verdict(&b, l, "t"); got != "[t]" {
		t.Fatalf("a released lease: %s", got)
	}
	b.Acquired("t", "A", 4)
	b.Registered("A", 1)
	b.Registered("A", 1) // the same incarnation again keeps the tokens
	if got := verdict(&b, l, "t"); got != "ok" {
		t.Fatalf("after registering as the same incarnation: %s", got)
	}
	b.Registered("B", 7) // another node's registration changes nothing
	b.Registered("A", 2) // a new incarnation holds nothing
	if got := verdict(&b, l, "t"); got != "[t]" {
		t.Fatalf("after registering as a new incarnation: %s", got)
	}
	b.Acquired("t", "A", 4)
	b.Lost("B")
	if got := verdict(&b, l, "t"); got != "ok" {
		t.Fatalf("another node lost: %s", got)
	}
	b.Lost("A")
	if got := verdict(&b, l, "t"); got != "[t]" {
		t.Fatalf("after the node was lost: %s", got)
	}
	b.Acquired("t", "A", 4)
	b.Dropped("t")
	if got := verdict(&b, l, "t"); got != "[t]" {
		t.Fatalf("a deleted session: %s", got)
	}
	b.Acquired("t", "A", 4)
	b.Fence("A") // again: nothing changes
	if got := verdict(&b, l, "t"); got != "ok" {
		t.Fatalf("after Fence again: %s", got)
	}
	b.Fence("")
	if got := verdict(&b, leases{}, "t"); got != "ok" {
		t.Fatalf("unfenced: %s", got)
	}
}
