package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// plainStore is a store that cannot count its sessions (its
// berth.SessionCounter is hidden): the census lists them instead.
type plainStore struct{ berth.Store }

// The census counts sessions as the API lists them, with a store that
// counts its stopped sessions and with one that does not: live ones with
// their live badge, stored ones (stopped, failed, another node's active
// one) as stored.
func TestCensusAgreesWithTheList(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(berth.Store) berth.Store
	}{{"counting store", nil}, {"listing store", func(s berth.Store) berth.Store { return plainStore{s} }}} {
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, home: t.TempDir(), wrap: c.wrap}
			e.open()
			t.Cleanup(e.close)
			if _, ok := e.m.store.(berth.SessionCounter); ok == (c.wrap != nil) {
				t.Fatalf("the store counts: %v", ok)
			}
			ctx := context.Background()
			e.create(berth.CreateRequest{})
			e.create(berth.CreateRequest{})
			stopped := e.create(berth.CreateRequest{})
			if _, err := e.m.StopSession(ctx, stopped.ID); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			for i, s := range []berth.Session{
				{Agent: "demo", State: berth.StateStopped, StopReason: berth.StopAgentCrashed},
				{Agent: "other", State: berth.StateStopped, StopReason: berth.StopUserRequested},
				{Agent: "other", State: berth.StateStopped, StopReason: berth.StopUserRequested,
					Failure: &berth.Failure{Kind: berth.FailInternal, Message: "x"}},
				// Another node's live session: no live session here.
				{Agent: "other", State: berth.StateActive},
			} {
				s.ID, s.Workspace, s.Labels = fmt.Sprintf("ses_stored%d", i), e.home, map[string]string{}
				s.CreatedAt, s.UpdatedAt, s.LastActivityAt = now, now, now
				if err := e.store.CreateSession(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]int{}
			page, err := e.m.ListSessions(ctx, berth.SessionFilter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Sessions {
				want[fmt.Sprintf("%s/%s/%s", s.State, s.Badge, s.Agent)]++
			}
			census, err := e.m.Census(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, n := range census.Sessions {
				got[fmt.Sprintf("%s/%s/%s", n.State, n.Badge, n.Agent)] += n.Sessions
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 6 {
				t.Fatalf("census %v\nlist   %v", got, want)
			}
		})
	}
}
