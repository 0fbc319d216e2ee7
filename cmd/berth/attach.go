package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// attachHelp is what /help prints in berth attach.
const attachHelp = `Enter sends a prompt (queued while the agent is busy); the line being typed stays below the output.
  /steer TEXT       deliver TEXT at the agent's next tool call
  /interrupt TEXT   (or !TEXT) cancel the turn and the queue, then run TEXT
  /cancel           cancel the turn in flight
  /queue            show the pending prompts
  /detach           (or Ctrl-D, Ctrl-C) leave; the session keeps running
While a permission question is open, the next line answers it (a number, an option's name or id).`

// newAttachCommand returns `berth attach ID`: the session live in the
// terminal, prompts typed in, permission questions answered here.
func newAttachCommand() *cobra.Command {
	var tail int
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Follow a session live and talk to it (Ctrl-D detaches; the session keeps running)",
		Long:  "Follow a session live in the terminal: its recent events, then everything as it comes.\n" + attachHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			return attach(cmd.Context(), c, args[0], tail, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&tail, "tail", 30, "recent events to show before following")
	return cmd
}

// attached is one attach session's state; only its loop touches it.
type attached struct {
	c   *bclient.Client
	id  string
	out io.Writer
	r   *eventRenderer
	// questions are the open permission requests, oldest first; the first
	// is the one asked.
	questions []*berth.Permission
	// forms are the open elicitations, oldest first, asked once no
	// permission question is open (attach_elicit.go).
	forms []*openForm
}

// attach runs until the user detaches (EOF, /detach, ctx ending) or the
// session stops. Events and typed lines meet in one loop, so all output
// is written by one goroutine.
func attach(ctx context.Context, c *bclient.Client, id string, tail int, in io.Reader, out io.Writer) error {
	s, err := c.GetSession(ctx, id)
	if err != nil {
		return err
	}
	con := openConsole(in, out)
	defer con.close()
	out = con.out
	a := &attached{c: c, id: id, out: out, r: newEventRenderer(out)}
	a.r.color = con.color
	a.r.showPrompts = true
	fmt.Fprintf(out, "attached to %s (%s, %s); /help for commands, Ctrl-D detaches\n", s.ID, s.Agent, statusText(s))
	if s.State == berth.StateStopped {
		fmt.Fprintf(out, "the session is stopped: berth resume %s\n", s.ID)
	}
	pending, err := c.ListPermissions(ctx, id, berth.PermissionPending)
	if err != nil {
		return err
	}
	a.questions = pending
	elics, err := c.ListElicitations(ctx, id, berth.ElicitationPending)
	if err != nil {
		return err
	}
	for _, e := range elics {
		a.forms = append(a.forms, newOpenForm(e))
	}

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan berth.Event)
	streamErr := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range c.Events(streamCtx, id, max(0, s.LastSeq-int64(tail))) {
			if err != nil {
				streamErr <- err
				return
			}
			select {
			case events <- ev:
			case <-streamCtx.Done():
				return
			}
		}
	}()
	// A blocked read of the terminal cannot be recalled: the reader lives
	// as long as the input does, and nothing waits for it.
	lines := make(chan string)
	go func() {
		defer close(lines)
		for {
			line, err := con.readLine()
			if err != nil {
				return
			}
			select {
			case lines <- line:
			case <-streamCtx.Done():
				return
			}
		}
	}()

	a.ask()
	if len(a.questions) == 0 {
		a.askForm()
	}
	for {
		select {
		case <-ctx.Done():
			a.r.line("detached (the session keeps running)")
			return nil
		case ev, ok := <-events:
			if !ok {
				select {
				case err := <-streamErr:
					return err
				default:
					return nil
				}
			}
			if done := a.event(ev, s.LastSeq); done {
				return nil
			}
		case line, ok := <-lines:
			if !ok {
				a.r.line("detached (the session keeps running)")
				return nil
			}
			if detach := a.input(ctx, line); detach {
				a.r.line("detached (the session keeps running)")
				return nil
			}
		}
	}
}

// event renders one event and keeps the open questions; true when the
// session stopped (after the events replayed up to seen).
func (a *attached) event(ev berth.Event, seen int64) bool {
	a.r.render(ev)
	a.elicitationEvent(ev, seen)
	d := decodeData(ev)
	switch ev.Type {
	case berth.EventPermissionRequested:
		if ev.Seq <= seen {
			// Replayed: the pending list read at the start has it if it is open.
			return false
		}
		var p struct {
			Permission berth.Permission `json:"permission"`
		}
		if err := json.Unmarshal(ev.Data, &p); err == nil && p.Permission.ID != "" {
			a.questions = append(a.questions, &p.Permission)
			if len(a.questions) == 1 {
				a.ask()
			}
		}
	case berth.EventPermissionResolved:
		id := d.str("permission_id")
		for i, q := range a.questions {
			if q.ID == id {
				a.questions = append(a.questions[:i], a.questions[i+1:]...)
				if i == 0 {
					a.ask()
					if len(a.questions) == 0 {
						a.askForm()
					}
				}
				break
			}
		}
	case berth.EventSessionStopped:
		if ev.Seq > seen {
			fmt.Fprintf(a.out, "the session stopped: berth resume %s brings it back\n", a.id)
			return true
		}
	}
	return false
}

// ask puts the first open question.
func (a *attached) ask() {
	if len(a.questions) == 0 {
		return
	}
	p := a.questions[0]
	names := make([]string, len(p.Options))
	for i, o := range p.Options {
		names[i] = fmt.Sprintf("%d) %s", i+1, printable(o.Name))
	}
	a.r.line(a.r.style(ansiBold, fmt.Sprintf("? %s — %s", orDash(toolTitle(p)), strings.Join(names, "  "))))
}

// input acts on one typed line; true means detach.
func (a *attached) input(ctx context.Context, line string) bool {
	line = strings.TrimSpace(line)
	if line == "" {
		return false
	}
	a.r.endLine()
	if a.formInput(ctx, line) {
		return false
	}
	if len(a.questions) > 0 && !strings.HasPrefix(line, "/") {
		p := a.questions[0]
		opt, ok := pickAnswer(p.Options, line)
		if !ok {
			a.r.line("answer with an option's number, name or id")
			return false
		}
		if _, err := a.c.DecidePermission(ctx, a.id, p.ID, berth.PermissionDecision{OptionID: opt.ID}); err != nil && !berth.IsCode(err, berth.EConflict) {
			a.r.line("! " + errorText(err))
		}
		// The permission_resolved event moves on to the next question.
		return false
	}
	cmd, rest, _ := strings.Cut(line, " ")
	switch {
	case cmd == "/detach" || cmd == "/quit":
		return true
	case cmd == "/help":
		a.r.line(attachHelp + "\n" + attachElicitHelp)
	case cmd == "/cancel":
		if turn, err := a.c.Cancel(ctx, a.id); err != nil {
			a.r.line("! " + errorText(err))
		} else {
			a.r.line(a.r.style(ansiDim, "cancelling "+turn))
		}
	case cmd == "/queue":
		q, err := a.c.ListQueue(ctx, a.id)
		if err != nil {
			a.r.line("! " + errorText(err))
			return false
		}
		if len(q.Entries) == 0 {
			a.r.line(a.r.style(ansiDim, "nothing pending"))
		}
		for _, e := range q.Entries {
			a.r.line(a.r.style(ansiDim, fmt.Sprintf("  %d. [%s] %s %s", e.Position, e.Kind, e.ID, shorten(e.Text, 80))))
		}
	case cmd == "/steer":
		a.prompt(ctx, rest, berth.ModeSteer)
	case cmd == "/interrupt":
		a.prompt(ctx, rest, berth.ModeInterrupt)
	case strings.HasPrefix(line, "!"):
		a.prompt(ctx, strings.TrimPrefix(line, "!"), berth.ModeInterrupt)
	case strings.HasPrefix(line, "/"):
		a.r.line("unknown command " + cmd + "; /help lists them")
	default:
		a.prompt(ctx, line, berth.ModeQueue)
	}
	return false
}

// prompt sends text in mode and says where it went.
func (a *attached) prompt(ctx context.Context, text, mode string) {
	if strings.TrimSpace(text) == "" {
		a.r.line("nothing to send")
		return
	}
	res, err := a.c.Prompt(ctx, a.id, berth.PromptRequest{Text: text, Mode: mode})
	if err != nil {
		a.r.line("! " + errorText(err))
		return
	}
	switch res.Status {
	case "queued":
		a.r.line(a.r.style(ansiDim, fmt.Sprintf("queued as %s (position %d)", res.EntryID, res.Position)))
	case "staged":
		a.r.line(a.r.style(ansiDim, "steer staged for the next tool call"))
	}
}
