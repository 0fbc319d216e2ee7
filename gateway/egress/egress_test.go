package egress_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/egress"
)

func TestSessionTakesOnlyAValidAllowList(t *testing.T) {
	p := egress.New(egress.Options{})
	defer p.Close()
	cases := []struct {
		policy berth.NetworkPolicy
		code   string
	}{
		{berth.NetworkPolicy{}, berth.EInvalid},
		{berth.NetworkPolicy{Mode: berth.NetworkOpen}, berth.EInvalid},
		{allowList(false, "*.com"), berth.EInvalid},
		{allowList(false, "ok.example.com", "bad host"), berth.EInvalid},
	}
	for _, c := range cases {
		if _, err := p.Session("ses_x", c.policy, egress.Hooks{}); !berth.IsCode(err, c.code) {
			t.Errorf("%+v: %v, want %s", c.policy, err, c.code)
		}
	}
	s, err := p.Session("ses_1", allowList(true, "Example.COM.", "example.com", "[::ffff:127.0.0.1]:80"), egress.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Policy(); !slices.Equal(got.Allow, []string{"example.com", "127.0.0.1:80"}) || got.Mode != berth.NetworkAllowList {
		t.Fatalf("policy %+v, want the list normalized", got)
	}
	if !s.Policy().Ask {
		t.Error("the policy lost its ask")
	}
	if s.ID() != "ses_1" {
		t.Errorf("ID %q", s.ID())
	}
	if _, err := p.Session("ses_1", allowList(false), egress.Hooks{}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("a second proxy for ses_1: %v, want %s", err, berth.EConflict)
	}
}

func TestAPolicyThatAsksWithNoAskHookRefuses(t *testing.T) {
	echo := newEcho(t)
	fn := names(echo)
	var d denials
	s := serve(t, egress.Options{Resolver: fn, Dialer: fn}, allowList(true), egress.Hooks{Denied: d.hook})
	connect(t, s.addr, "a.example.com:443").wantStatus(t, http.StatusForbidden, "not in this session's network allow list")
	if got := d.list(); !slices.Equal(got, []string{"ses_1 a.example.com:443"}) {
		t.Fatalf("denials %q", got)
	}
}
