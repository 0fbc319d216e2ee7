package http

import (
	"context"

	"github.com/berth-sh/berth"
)

// The fake has no elicitations: the routes are exercised against a real
// daemon (cmd/berth's elicitation tests); these only satisfy the interface.

// ListElicitations implements berth.SessionService.
func (f *fakeService) ListElicitations(_ context.Context, id, _ string) ([]*berth.Elicitation, error) {
	return inSession(f, "", id, func(*berth.Session) ([]*berth.Elicitation, error) { return []*berth.Elicitation{}, nil })
}

// GetElicitation implements berth.SessionService.
func (f *fakeService) GetElicitation(_ context.Context, id, eid string) (*berth.Elicitation, error) {
	return nil, berth.Errorf(berth.ENotFound, "session %s has no elicitation %s", id, eid)
}

// AnswerElicitation implements berth.SessionService.
func (f *fakeService) AnswerElicitation(_ context.Context, id, eid string, _ berth.ElicitationAnswer) (*berth.Elicitation, error) {
	return nil, berth.Errorf(berth.ENotFound, "session %s has no elicitation %s", id, eid)
}
