package session

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/transcript"
)

// transcripts read sessions' logs a turn at a time: the transcript, a
// turn's result once it is over, the preamble an agent that could not
// reopen its conversation is given, and a session's last words.
type transcripts struct {
	m *Manager
}

// transcriptPage is how many events a transcript reads from the store at
// a time.
const transcriptPage = 256

// Transcript implements berth.SessionService: it folds the log into turns.
// The work is linear in the log's size, and stops as soon as ctx ends (a
// client that went away).
func (m *Manager) Transcript(ctx context.Context, id string) ([]berth.TranscriptTurn, error) {
	turns := []berth.TranscriptTurn{}
	err := m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		turns = append(turns, *t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return turns, nil
}

// TranscriptEach implements berth.TranscriptStreamer: the turns are folded
// from the log and handed to fn one at a time, each once the next begins
// (or the log ends), so that only one is ever held.
func (m *Manager) TranscriptEach(ctx context.Context, id string, fn func(*berth.TranscriptTurn) error) error {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return err
	}
	if m.set.liveOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return err
		}
	}
	b := transcript.Builder{Emit: fn, Long: func(turnID string) berth.LongText { return m.transcripts.turnText(id, turnID) }}
	if err := m.transcripts.foldLog(ctx, id, berth.EventFilter{}, &b); err != nil {
		return err
	}
	return b.Flush()
}

// foldLog folds the session's events that f selects (its After, Limit and
// MaxBytes are set here) into b, a page at a time, checking ctx between
// events; it stops at b's first error.
func (tr *transcripts) foldLog(ctx context.Context, id string, f berth.EventFilter, b *transcript.Builder) error {
	f.After, f.Limit, f.MaxBytes = 0, transcriptPage, berth.EventPageBytes
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		evs, err := tr.m.store.ListEvents(ctx, id, f)
		if err != nil {
			return err
		}
		for i := range evs {
			if i%64 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := b.Add(&evs[i]); err != nil {
				return err
			}
			// What Add kept is its own: the raw event goes now, not with
			// the page.
			evs[i].Data = nil
		}
		if len(evs) == 0 {
			return nil
		}
		f.After = evs[len(evs)-1].Seq
	}
}

// turnText reads the agent's message of one turn from the log, a page at
// a time, handing each piece over as the body of a JSON string.
func (tr *transcripts) turnText(id, turnID string) berth.LongText {
	return func(ctx context.Context, each func([]byte) error) error {
		f := berth.EventFilter{Type: berth.EventAgentMessage, TurnID: turnID, Limit: transcriptPage, MaxBytes: berth.EventPageBytes}
		for {
			evs, err := tr.m.store.ListEvents(ctx, id, f)
			if err != nil || len(evs) == 0 {
				return err
			}
			for i := range evs {
				if body := transcript.TextBody(evs[i].Data); len(body) > 0 {
					if err := each(body); err != nil {
						return err
					}
				}
			}
			f.After = evs[len(evs)-1].Seq
		}
	}
}

// transcriptPreamble renders a session's conversation so far for an agent
// that has to start it over: it goes before the first prompt of the new
// conversation. "" when there was none.
func (tr *transcripts) transcriptPreamble(ctx context.Context, id string) (string, error) {
	var p transcript.Preamble
	err := tr.m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		turn, err := transcript.RenderTurn(ctx, t, transcript.MaxPreambleTurn)
		p.Add(turn)
		return err
	})
	if err != nil {
		return "", err
	}
	return p.String("[berth: this session was resumed in a new conversation; the conversation so far follows]\n"), nil
}
