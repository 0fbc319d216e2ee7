package session

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/transcript"
)

// WaitTurn implements berth.SessionService.
func (m *Manager) WaitTurn(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if strings.HasPrefix(turnID, entryPrefix) {
		// A queued or staged prompt: its turn is known once it runs.
		return m.waitEntry(ctx, id, turnID)
	}
	if ls := m.set.liveOf(id); ls != nil {
		res, entry, err := ls.WaitTurn(ctx, turnID)
		if err != nil {
			return nil, err
		}
		if res != nil {
			// The answer comes after the turn's turn_ended in the log: a
			// client that reads the log next finds it.
			if err := m.log.FlushSession(ctx, id); err != nil {
				return nil, err
			}
			return res, nil
		}
		if entry != "" {
			// An interrupt's turn starts once the turn it cancelled has ended.
			return m.waitEntry(ctx, id, entry)
		}
	}
	// The turn is over (or the session stopped since, or its text was too
	// long to keep in memory): rebuild it from the log.
	if err := m.log.FlushSession(ctx, id); err != nil {
		return nil, err
	}
	return m.transcripts.turnFromLog(ctx, id, turnID)
}

// turnFromLog rebuilds a finished turn's result from its events alone
// (the store finds them by the turn), in time linear in their size; it
// stops when ctx ends.
func (tr *transcripts) turnFromLog(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	if tr.m.set.liveOf(id) == nil {
		if _, err := tr.m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	b := transcript.Builder{Long: func(turnID string) berth.LongText { return tr.turnText(id, turnID) }}
	if err := tr.foldLog(ctx, id, berth.EventFilter{TurnID: turnID}, &b); err != nil {
		return nil, err
	}
	for _, t := range b.Finish() {
		if t.TurnID != turnID {
			continue
		}
		if t.StopReason == "" {
			return nil, berth.Errorf(berth.EConflict, "turn %s has not ended", turnID)
		}
		res := &berth.TurnResult{TurnID: turnID, StopReason: t.StopReason, Text: t.Text, Long: t.Long}
		if len(t.Error) > 0 {
			var e berth.ACPError
			if json.Unmarshal(t.Error, &e) == nil {
				res.Error = &e
			}
		}
		return res, nil
	}
	return nil, berth.Errorf(berth.ENotFound, "turn %s not found", turnID)
}

// Cancel implements berth.SessionService: it asks the agent to end the turn
// in flight and, if the agent has not within limits.cancel_grace, kills it.
func (m *Manager) Cancel(ctx context.Context, id string) (string, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return "", err
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return "", err
		}
		return "", berth.Errorf(berth.EConflict, "session is stopped: no turn to cancel")
	}
	return ls.CancelTurn()
}
