package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// Repair implements berth.SessionService. The log is append-only: repair
// never rewrites an event, it appends what closes the log properly — a
// failed tool_call_update (marked interrupted) for every tool call left
// without a final status, a turn_ended for a turn left open, and a
// session_stopped at the end when the log does not end with one. Gaps,
// duplicates and unreadable data are reported; they cannot be mended by
// appending. Running it twice finds nothing the second time.
func (m *Manager) Repair(ctx context.Context, id string, dryRun, force bool) (*berth.RepairReport, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	s, err := m.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	rep := &berth.RepairReport{Issues: []berth.RepairItem{}, Actions: []berth.RepairItem{}}
	if s.State != berth.StateStopped || m.set.liveOf(id) != nil {
		rep.Issues = append(rep.Issues, berth.RepairItem{Kind: berth.RepairSessionNotStopped,
			Message: fmt.Sprintf("the session is %s: only a stopped session is repaired", s.State)})
		return rep, nil
	}
	if err := m.log.FlushSession(ctx, id); err != nil {
		return nil, err
	}
	scan, err := scanLog(ctx, m.store, id)
	if err != nil {
		return nil, err
	}
	rep.Issues = append(rep.Issues, scan.issues...)
	events := scan.plan(s, rep)
	if len(events) == 0 || dryRun {
		return rep, nil
	}
	// A user stopped this session on purpose: its log is changed only when asked.
	if (s.StopReason == berth.StopUserRequested || s.StopReason == berth.StopDaemonShutdown) && !force {
		rep.Issues = append(rep.Issues, berth.RepairItem{Kind: berth.RepairForceRequired,
			Message: "the session was stopped by its user: repair it with force"})
		return rep, nil
	}
	for _, ev := range events {
		if _, err := m.log.AppendSync(ctx, ev); err != nil {
			return nil, err
		}
	}
	rep.Persisted = true
	return rep, nil
}

// logScan is what a pass over a session's log found.
type logScan struct {
	issues []berth.RepairItem
	// calls are the tool calls without a final status, in order.
	calls []openCall
	// openTurn is the turn started and not ended, if any.
	openTurn string
	// lastType is the type of the log's last event.
	lastType string
}

// openCall is a tool call still pending or in progress.
type openCall struct {
	id, turnID string
	seq        int64
}

// scanLog reads a session's whole log once, in pages.
func scanLog(ctx context.Context, store berth.EventStore, id string) (*logScan, error) {
	sc := &logScan{}
	state := map[string]int{} // tool call id → index in sc.calls, -1 once final
	want, after := int64(1), int64(0)
	for {
		evs, err := store.ListEvents(ctx, id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit, MaxBytes: berth.EventPageBytes})
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			switch {
			case ev.Seq > want:
				sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairSeqGap, Seq: ev.Seq,
					Message: fmt.Sprintf("seq %d follows %d", ev.Seq, want-1)})
			case ev.Seq < want:
				sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairSeqDuplicate, Seq: ev.Seq,
					Message: fmt.Sprintf("seq %d comes again", ev.Seq)})
			}
			want = ev.Seq + 1
			if len(ev.Data) > 0 && !json.Valid(ev.Data) {
				sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairInvalidJSON, Seq: ev.Seq,
					Message: "the event's data is not valid JSON"})
			}
			sc.observe(ev, state)
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	kept := sc.calls[:0]
	for _, c := range sc.calls {
		if state[c.id] >= 0 {
			kept = append(kept, c)
			sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairDanglingToolCall, Seq: c.seq, TurnID: c.turnID,
				ToolCallID: c.id, Message: "the tool call never reached a final status"})
		}
	}
	sc.calls = kept
	if sc.openTurn != "" {
		sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairOpenTurn, TurnID: sc.openTurn,
			Message: "the turn has no turn_ended"})
	}
	if sc.lastType != berth.EventSessionStopped {
		sc.issues = append(sc.issues, berth.RepairItem{Kind: berth.RepairMissingStopped,
			Message: "the log does not end with session_stopped"})
	}
	return sc, nil
}

// observe follows turns and tool calls through one event.
func (sc *logScan) observe(ev berth.Event, state map[string]int) {
	if !lateAfterStop(ev.Type) {
		sc.lastType = ev.Type
	}
	switch ev.Type {
	case berth.EventTurnStarted:
		sc.openTurn = ev.TurnID
	case berth.EventTurnEnded:
		if sc.openTurn == ev.TurnID {
			sc.openTurn = ""
		}
	case berth.EventToolCall, berth.EventToolCallUpdate:
		var d struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ToolCallID == "" {
			return
		}
		if _, seen := state[d.ToolCallID]; !seen && ev.Type == berth.EventToolCall {
			state[d.ToolCallID] = len(sc.calls)
			sc.calls = append(sc.calls, openCall{id: d.ToolCallID, turnID: ev.TurnID, seq: ev.Seq})
		}
		if d.Status == "completed" || d.Status == "failed" {
			state[d.ToolCallID] = -1
		}
	}
}

// plan lists, as events and as report actions, what closes the log.
func (sc *logScan) plan(s *berth.Session, rep *berth.RepairReport) []berth.Event {
	var out []berth.Event
	add := func(turnID, typ string, data any, item berth.RepairItem) {
		out = append(out, berth.NewEvent(s.ID, turnID, typ, data))
		item.Event = typ
		rep.Actions = append(rep.Actions, item)
	}
	for _, c := range sc.calls {
		// A closed turn's events end with its turn_ended: a late update goes outside it.
		turnID := ""
		if c.turnID == sc.openTurn {
			turnID = c.turnID
		}
		add(turnID, berth.EventToolCallUpdate, interruptedCall(c.id),
			berth.RepairItem{TurnID: c.turnID, ToolCallID: c.id, Kind: berth.RepairDanglingToolCall,
				Message: "mark the tool call failed (interrupted)"})
	}
	if sc.openTurn != "" {
		add(sc.openTurn, berth.EventTurnEnded, live.TurnEndedData{StopReason: berth.TurnError,
			Error: &berth.ACPError{Code: "interrupted", Message: "the turn was interrupted and closed by repair"}},
			berth.RepairItem{TurnID: sc.openTurn, Kind: berth.RepairOpenTurn, Message: "close the turn (stop_reason error)"})
	}
	// Whatever is appended, the log ends with session_stopped again.
	if len(out) > 0 || sc.lastType != berth.EventSessionStopped {
		add("", berth.EventSessionStopped, map[string]any{"stop_reason": s.StopReason, "failure": s.Failure},
			berth.RepairItem{Kind: berth.RepairMissingStopped, Message: "end the log with session_stopped"})
	}
	return out
}

// interruptedCall is the data of the tool_call_update that fails a tool
// call the agent never finished.
func interruptedCall(id string) map[string]any {
	return map[string]any{"tool_call_id": id, "status": "failed", "interrupted": true,
		"raw": map[string]any{"toolCallId": id, "status": "failed"}}
}
