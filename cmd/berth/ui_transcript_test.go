package main

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
)

// transcriptLooks is the JS expression of what the transcript shows: how
// many times and raw JSON buttons are visible, and its visible text.
const transcriptLooks = `(() => {
	const tr = document.querySelector('.transcript');
	const shown = (el) => el.getClientRects().length > 0;
	return { times: [...tr.querySelectorAll('time')].filter(shown).length,
		raws: [...tr.querySelectorAll('.raw-toggle')].filter(shown).length,
		text: tr.innerText };
})()`

// transcriptLook is what transcriptLooks answers.
type transcriptLook struct {
	Times int    `json:"times"`
	Raws  int    `json:"raws"`
	Text  string `json:"text"`
}

// The transcript reads as a conversation: no times, no raw JSON buttons,
// no checkpoint, turn end or start lines, and no "Started." under the
// Prompt box; `Show details` shows all of them, and hides them again.
func TestUITranscriptShowsTheMachineryOnlyWithDetails(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{"prompt": "write a.txt one"})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the first turn's end", agentSaid("wrote a.txt")+" && "+logHas("turn_ended")+" && "+logHas("checkpoint_created"))
	tab.Run(browsertest.Type(browsertest.Field("Prompt"), "echo from the box"), browsertest.Click(browsertest.Button("Send")))
	tab.WaitFor("the answer", agentSaid("from the box"))
	tab.WaitFor("the second turn's end", `document.querySelectorAll('.transcript .ev[data-type=turn_ended]').length == 2`)

	machinery := []string{"Checkpoint ckpt_", "Turn ended: end_turn", "Session created", "Agent started"}
	var look transcriptLook
	tab.Eval(transcriptLooks, &look)
	if look.Times != 0 || look.Raws != 0 {
		t.Errorf("without the details the transcript shows %d times and %d raw JSON buttons", look.Times, look.Raws)
	}
	for _, m := range machinery {
		if strings.Contains(look.Text, m) {
			t.Errorf("without the details the transcript shows %q:\n%s", m, look.Text)
		}
	}
	for _, said := range []string{"write a.txt one", "wrote a.txt", "echo from the box", "from the box"} {
		if !strings.Contains(look.Text, said) {
			t.Errorf("the conversation lacks %q:\n%s", said, look.Text)
		}
	}
	var status string
	tab.Eval(`document.querySelector('.prompt-box [role=status]').textContent`, &status)
	if status != "" {
		t.Errorf("the Prompt box says %q after its prompt started", status)
	}

	tab.Run(browsertest.Click(browsertest.Field("Show details")))
	tab.WaitFor("the details", `document.querySelector('.transcript time').getClientRects().length > 0`)
	tab.Eval(transcriptLooks, &look)
	var entries int
	tab.Eval(`document.querySelectorAll('.transcript .ev').length`, &entries)
	if look.Times != entries || look.Raws != entries {
		t.Errorf("with the details %d times and %d raw JSON buttons show, want one each on %d entries", look.Times, look.Raws, entries)
	}
	for _, m := range machinery {
		if !strings.Contains(look.Text, m) {
			t.Errorf("with the details the transcript lacks %q:\n%s", m, look.Text)
		}
	}
	tab.Run(browsertest.Click(`//button[@aria-label='Raw JSON of event 1']`))
	tab.WaitFor("the first event's JSON", `(p => p && p.getClientRects().length > 0 && p.textContent.includes('"type": "session_created"'))(document.querySelector('.ev[data-seq="1"] > pre.raw'))`)
	// A one-line note opened on its JSON reads as code: left-aligned, as
	// wide as the transcript.
	var wide bool
	tab.Eval(`(e => getComputedStyle(e.querySelector('pre.raw')).textAlign == 'left' &&
		Math.abs(e.getBoundingClientRect().width - document.querySelector('.transcript .entries').getBoundingClientRect().width) < 1)(document.querySelector('.ev[data-seq="1"]'))`, &wide)
	if !wide {
		t.Error("the JSON of a note is centred in it, not laid out as code across the transcript")
	}
	shot(t, tab, "session-details")

	tab.Run(browsertest.Click(browsertest.Field("Show details")))
	tab.WaitFor("the details hidden again", `document.querySelector('.transcript time').getClientRects().length == 0 && document.querySelector('.ev[data-seq="1"]').getClientRects().length == 0`)
	tab.Eval(transcriptLooks, &look)
	if look.Times != 0 || look.Raws != 0 || strings.Contains(look.Text, "session_created") || strings.Contains(look.Text, "Checkpoint ckpt_") {
		t.Errorf("after Show details is unticked the transcript shows: %+v", look)
	}
	noPageErrors(t, tab)
}

// An answer streamed while prompts are queued and dropped is one Agent
// bubble; the queued and the dropped prompts are told by their words.
func TestUIOneAgentBubbleAcrossQueuedPrompts(t *testing.T) {
	b := browsertest.New(t)
	s := startServer(t, t.TempDir())
	id := createSession(t, s, map[string]any{})
	tab := uiPage(t, b, s, "/sessions/"+id)
	tab.WaitFor("the page", `document.querySelector('.transcript').dataset.lastSeq`)
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts", map[string]any{"text": "echo start\nsleep 4000\necho end of the first"}, nil); st != 202 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	tab.WaitFor("the answer streaming", agentSaid("start."))
	send := func(text string) {
		tab.Run(browsertest.Type(browsertest.Field("Prompt"), text), browsertest.Click(browsertest.Button("Send")))
		tab.WaitFor("the prompt accepted", `document.getElementById('prompt').value == ''`)
	}
	send("echo the queued one")
	send("echo to drop")
	tab.WaitFor("two queue entries", `document.querySelectorAll('.queue li[data-entry]').length == 2`)
	tab.Run(browsertest.Click(`//li[@data-entry][contains(., "to drop")]//button[normalize-space(.)="Drop"]`))
	tab.WaitFor("both answers", agentSaid("end of the first")+" && "+agentSaid("the queued one"))

	// The test shows something only if a queue event came in the middle
	// of the streamed answer.
	first := ""
	var chunks, queue []int64
	for _, ev := range s.allEvents(t, id) {
		if ev.Type == "agent_message" && (first == "" || ev.TurnID == first) {
			first = ev.TurnID
			chunks = append(chunks, ev.Seq)
		}
		if ev.Type == "prompt_queued" || ev.Type == "prompt_canceled" {
			queue = append(queue, ev.Seq)
		}
	}
	inside := false
	for _, q := range queue {
		inside = inside || len(chunks) > 0 && chunks[0] < q && q < chunks[len(chunks)-1]
	}
	if !inside {
		t.Fatalf("no queue event (%v) came in the middle of the first answer (%v)", queue, chunks)
	}

	var bubbles []string
	tab.Eval(`[...document.querySelectorAll('.transcript .ev.agent-message .md')].map(e => e.innerText)`, &bubbles)
	if len(bubbles) != 2 || !strings.HasPrefix(bubbles[0], "start.") || !strings.Contains(bubbles[0], "end of the first") || bubbles[1] != "the queued one" {
		t.Fatalf("the agent's bubbles: %q, want the streamed answer whole, then the queued one's", bubbles)
	}
	tab.WaitFor("the queued prompt's words", transcriptHas("Queued: “echo the queued one”"))
	tab.WaitFor("the dropped prompt's words", transcriptHas("Dropped: “echo to drop”"))
	noPageErrors(t, tab)
}
