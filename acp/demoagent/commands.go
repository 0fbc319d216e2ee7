package demoagent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The prompt language. Each non-blank line of a prompt is one command, run in
// order; a line whose first word is not a command is echoed back whole.
//
//	echo TEXT          agent_message_chunk TEXT
//	think TEXT         agent_thought_chunk TEXT
//	write PATH TEXT    tool_call (edit) + fs/write_text_file, then "wrote PATH"
//	read PATH          tool_call (read) + fs/read_text_file, then the content
//	run CMD…           tool_call (execute) + terminal/create (sh -c CMD…),
//	                   wait_for_exit, output, release; then the output
//	ask TEXT           session/request_permission, then "permission: allow",
//	                   "permission: allow_always", "permission: rejected" or
//	                   "permission: cancelled" (the last ends the turn cancelled)
//	sleep MS           waits MS ms, a "." chunk every 100 ms; cancellable
//	flood N SIZE       N chunks of SIZE 'x' bytes, as fast as possible
//	crash [CODE]       exits the process with CODE (default 1)
//	hang               stops answering anything, ignoring session/cancel
//	stderr TEXT        writes TEXT and a newline to stderr
//	plan A|B|C         plan update, entries pending / medium
//	usage USED SIZE    usage_update
//	mode, model, config, /echo, /plan: see controls.go
//	logout             forgets the demo login (--require-auth): later
//	                   prompts answer auth_required until authenticate
//	elicit TEXT        elicitation/create (form, one required string field
//	                   "answer"), then "answer: VALUE" or "elicitation ACTION"
//	mcp SERVER TOOL JSON  tool_call (fetch) + tools/call of TOOL with the
//	                   JSON object on the session's MCP server SERVER; then
//	                   the tool's text, or "mcp error: …"
//	llm TEXT           POST $ANTHROPIC_BASE_URL/v1/messages with
//	                   $ANTHROPIC_API_KEY, then "llm: STATUS ANSWER" (the
//	                   answer's first text, or its error's message)
//	fetch URL          GET URL through $HTTP_PROXY (none when it is unset),
//	                   then "fetch: STATUS BODY" or "fetch: error"
//	fetch-direct URL   the same, never through a proxy
//
// Text layout: every message (echo, echoed lines, tool results) is its own
// agent_message_chunk. The first message of a turn is sent as TEXT and later
// ones as "\n"+TEXT, so concatenating a turn's chunks gives the messages one
// per line ("echo a\necho b" → "a\nb"). Stream chunks (sleep's dots, flood's
// x's) are sent raw, without a separator, but count as output: a message
// after them starts with "\n". Thoughts follow the same rule among
// themselves. A malformed command answers with a "usage: …" message.

// tickInterval is how often sleep emits a chunk.
const tickInterval = 100 * time.Millisecond

// errCancelled ends a turn with stopReason cancelled.
var errCancelled = errors.New("turn cancelled")

// errCrashed is returned after the exit hook when it does not exit (tests).
var errCrashed = errors.New("demo agent crashed")

// turn is one session/prompt in progress.
type turn struct {
	a   *agent
	s   *session
	cwd string
	// ctx is cancelled by session/cancel (and by disconnect).
	ctx context.Context
	// nctx is for notifications, which must still go out after a cancel
	// (e.g. the failed tool call and "permission: cancelled").
	nctx context.Context

	saidAny    bool // an agent_message_chunk was sent in this turn
	thoughtAny bool // an agent_thought_chunk was sent in this turn
}

// command runs one command with the rest of its line.
type command func(t *turn, args string) error

// commands maps a line's first word to its command.
var commands = map[string]command{
	"echo":   (*turn).say,
	"logout": (*turn).logout,
	"think":  (*turn).think,
	"write":  (*turn).write,
	"read":   (*turn).read,
	"run":    (*turn).runCmd,
	"ask":    (*turn).ask,
	"sleep":  (*turn).sleep,
	"flood":  (*turn).flood,
	"crash":  (*turn).crash,
	"hang":   (*turn).hang,
	"stderr": (*turn).stderrCmd,
	"plan":   (*turn).plan,
	"usage":  (*turn).usage,
	"mcp":    (*turn).mcpCall,
	"elicit": (*turn).elicit,
	"llm":    (*turn).llm,
	"fetch":  (*turn).fetch,
	// A direct connection, the way a program ignoring HTTP_PROXY makes it.
	"fetch-direct": (*turn).fetchDirect,
}

// run executes the prompt's lines and returns the stop reason.
func (t *turn) run(text string) (acp.StopReason, error) {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if t.ctx.Err() != nil {
			return acp.StopReasonCancelled, nil
		}
		if err := t.exec(line); err != nil {
			if errors.Is(err, errCancelled) || t.ctx.Err() != nil {
				return acp.StopReasonCancelled, nil
			}
			return "", err
		}
	}
	if t.ctx.Err() != nil {
		return acp.StopReasonCancelled, nil
	}
	return acp.StopReasonEndTurn, nil
}

// exec runs one line.
func (t *turn) exec(line string) error {
	word, args := cutWord(line)
	if cmd, ok := commands[word]; ok {
		if t.refusedInPlan(word) {
			return t.say("refused in plan mode: " + word)
		}
		return cmd(t, args)
	}
	return t.say(line)
}

// cutWord splits s into its first blank-separated word and the rest, with
// the blanks around the word removed.
func cutWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// record appends to the session history; a failure is reported on stderr
// and does not stop the turn.
func (t *turn) record(r record) {
	if err := t.s.log.append(r); err != nil {
		fmt.Fprintf(t.a.stderr, "agent-demo: history of %s: %v\n", t.s.id, err)
	}
}

// update sends a session/update for this turn's session.
func (t *turn) update(u acp.SessionUpdate) error {
	return t.a.update(t.nctx, t.s.id, u)
}

// say sends one message (see the text layout above).
func (t *turn) say(text string) error {
	if t.saidAny {
		text = "\n" + text
	}
	return t.stream(text)
}

// stream sends an agent_message_chunk as is.
func (t *turn) stream(text string) error {
	t.saidAny = true
	t.record(record{Type: recAgent, Text: text})
	return t.update(acp.UpdateAgentMessageText(text))
}

// think sends one thought.
func (t *turn) think(text string) error {
	if t.thoughtAny {
		text = "\n" + text
	}
	t.thoughtAny = true
	t.record(record{Type: recThought, Text: text})
	return t.update(acp.UpdateAgentThoughtText(text))
}

// sleep waits MS milliseconds, sending "." at each full 100 ms before the
// end (so sleep 250 sends 2 dots, sleep 200 sends 1).
func (t *turn) sleep(args string) error {
	ms, err := strconv.Atoi(strings.TrimSpace(args))
	if err != nil || ms < 0 {
		return t.say("usage: sleep MS")
	}
	start := time.Now()
	end := start.Add(time.Duration(ms) * time.Millisecond)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := 1; ; i++ {
		next := start.Add(time.Duration(i) * tickInterval)
		last := !next.Before(end)
		if last {
			next = end
		}
		timer.Reset(time.Until(next))
		select {
		case <-t.ctx.Done():
			return errCancelled
		case <-timer.C:
		}
		if last {
			return nil
		}
		if err := t.stream("."); err != nil {
			return err
		}
	}
}

// flood sends N chunks of SIZE 'x' bytes. They are recorded in the history
// as one record with a repeat count.
func (t *turn) flood(args string) error {
	n, size, ok := twoInts(args)
	if !ok || n < 0 || size < 0 {
		return t.say("usage: flood N SIZE")
	}
	chunk := strings.Repeat("x", size)
	sent, err := t.a.sendRepeated(t.ctx, t.s.id, acp.UpdateAgentMessageText(chunk), n)
	if sent > 0 {
		t.saidAny = true
		t.record(record{Type: recAgent, Text: chunk, Repeat: sent})
	}
	if err != nil && t.ctx.Err() != nil {
		return errCancelled
	}
	return err
}

// crash exits the process with CODE (default 1).
func (t *turn) crash(args string) error {
	code := 1
	if s := strings.TrimSpace(args); s != "" {
		c, err := strconv.Atoi(s)
		if err != nil {
			return t.say("usage: crash [CODE]")
		}
		code = c
	}
	t.a.exit(code)
	return errCrashed
}

// hang makes the whole agent stop answering: this prompt never returns,
// session/cancel is ignored, nothing more is written to stdout, and Main
// does not return even when stdin closes. Only a kill ends it.
func (t *turn) hang(string) error {
	t.a.setHung()
	waitRelease(t.a.release)
	return errHung
}

// stderrCmd writes TEXT and a newline to stderr.
func (t *turn) stderrCmd(args string) error {
	_, err := fmt.Fprintln(t.a.stderr, args)
	return err
}

// plan sends a plan with one pending, medium-priority entry per '|'-separated
// item.
func (t *turn) plan(args string) error {
	var entries []acp.PlanEntry
	for item := range strings.SplitSeq(args, "|") {
		if item = strings.TrimSpace(item); item != "" {
			entries = append(entries, acp.PlanEntry{
				Content:  item,
				Priority: acp.PlanEntryPriorityMedium,
				Status:   acp.PlanEntryStatusPending,
			})
		}
	}
	if len(entries) == 0 {
		return t.say("usage: plan A|B|C")
	}
	return t.update(acp.UpdatePlan(entries...))
}

// twoInts reads the arguments "A B" of a command, two whole numbers.
func twoInts(args string) (a, b int, ok bool) {
	f := strings.Fields(args)
	if len(f) != 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(f[0])
	b, err2 := strconv.Atoi(f[1])
	return a, b, err1 == nil && err2 == nil
}

// usage sends a usage_update with USED tokens of a SIZE-token context.
func (t *turn) usage(args string) error {
	used, size, ok := twoInts(args)
	if !ok {
		return t.say("usage: usage USED SIZE")
	}
	return t.update(acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{Used: used, Size: size}})
}
