package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// asker puts a session's permission requests to the user at the terminal
// (berth run in ask or approve-reads mode) and sends the answers to the
// daemon.
type asker struct {
	client *bclient.Client
	out    io.Writer
	// permissions says whether permission requests are put too (the
	// modes that ask).
	permissions bool
	// lines are the user's answers, read from in by one goroutine that
	// lives as long as the input does (a blocked read cannot be recalled);
	// it starts at the first question, so input no question asks for is
	// never read.
	lines   chan string
	in      io.Reader
	started sync.Once
}

// newAsker returns an asker reading answers from in.
func newAsker(c *bclient.Client, in io.Reader, out io.Writer) *asker {
	return &asker{client: c, out: out, in: in, lines: make(chan string)}
}

// start starts reading the input, once.
func (a *asker) start() {
	a.started.Do(func() {
		go func() {
			defer close(a.lines)
			sc := bufio.NewScanner(a.in)
			for sc.Scan() {
				a.lines <- sc.Text()
			}
		}()
	})
}

// ask asks about one permission until the user names an option, then
// decides it. It gives up when ctx ends (Ctrl-C cancels the turn, which
// answers the request) and rejects once when the input ends.
func (a *asker) ask(ctx context.Context, sessionID string, p *berth.Permission) error {
	if len(p.Options) == 0 {
		return nil
	}
	// A request the session's policy or an earlier "always" answered, or
	// one seen again after a reconnect, is not asked.
	pending, err := a.client.ListPermissions(ctx, sessionID, berth.PermissionPending)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pending, func(q *berth.Permission) bool { return q.ID == p.ID }) {
		return nil
	}
	a.start()
	names := make([]string, len(p.Options))
	for i, o := range p.Options {
		names[i] = fmt.Sprintf("%d) %s", i+1, printable(o.Name))
	}
	for {
		fmt.Fprintf(a.out, "? %s — %s: ", orDash(toolTitle(p)), strings.Join(names, "  "))
		var line string
		var ok bool
		select {
		case line, ok = <-a.lines:
		case <-ctx.Done():
			fmt.Fprintln(a.out)
			return nil
		}
		d := berth.PermissionDecision{Decision: berth.DecisionRejectOnce}
		if ok {
			opt, found := pickAnswer(p.Options, line)
			if !found {
				fmt.Fprintf(a.out, "answer with an option's name or number\n")
				continue
			}
			d = berth.PermissionDecision{OptionID: opt.ID}
		} else {
			fmt.Fprintln(a.out, "(no more input: rejected)")
		}
		_, err := a.client.DecidePermission(ctx, sessionID, p.ID, d)
		if berth.IsCode(err, berth.EConflict) {
			// The timeout or a cancel answered first.
			fmt.Fprintf(a.out, "permission %s was already answered\n", p.ID)
			return nil
		}
		if berth.IsCode(err, berth.EInvalid) && !ok {
			// The agent offered no reject_once: leave it to the timeout.
			return nil
		}
		return err
	}
}

// pickAnswer finds the option a typed answer names: its number, its name
// or its id, ignoring case and surrounding blanks.
func pickAnswer(opts []berth.PermissionOption, answer string) (berth.PermissionOption, bool) {
	answer = strings.TrimSpace(answer)
	if n, err := strconv.Atoi(answer); err == nil && n >= 1 && n <= len(opts) {
		return opts[n-1], true
	}
	for _, o := range opts {
		if strings.EqualFold(answer, o.Name) || strings.EqualFold(answer, o.ID) {
			return o, true
		}
	}
	return berth.PermissionOption{}, false
}
