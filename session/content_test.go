package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// pngBytes is the start of a PNG file: 8 bytes the demo agent counts.
var pngBytes = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// promptContent runs one content prompt to its end.
func (e *env) promptContent(id string, blocks ...berth.ContentBlock) *berth.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := e.m.Prompt(ctx, id, berth.PromptRequest{Content: blocks})
	if err != nil {
		e.t.Fatalf("prompt: %v", err)
	}
	res, err := e.m.WaitTurn(ctx, id, r.TurnID)
	if err != nil {
		e.t.Fatalf("wait turn: %v", err)
	}
	return res
}

func TestContentPromptReachesTheAgentAndTheLog(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	if err := os.WriteFile(filepath.Join(s.Workspace, "notes.txt"), []byte("hello notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := base64.StdEncoding.EncodeToString(pngBytes)
	res := e.promptContent(s.ID,
		berth.ContentBlock{Type: berth.ContentText, Text: "echo hi"},
		berth.ContentBlock{Type: berth.ContentImage, MimeType: "image/png", Data: img},
		berth.ContentBlock{Type: berth.ContentResource, URI: "mem://a", Text: "12345"},
		berth.ContentBlock{Type: berth.ContentFile, Path: "notes.txt"},
		berth.ContentBlock{Type: berth.ContentResourceLink, URI: "https://example.com/x.md"})
	want := []string{"image image/png 8", "resource mem://a 5",
		"resource file://" + filepath.Join(s.Workspace, "notes.txt") + " 11", "resource_link https://example.com/x.md", "hi"}
	for _, w := range want {
		if !strings.Contains(res.Text, w) {
			t.Errorf("agent said %q, want %q in it", res.Text, w)
		}
	}
	started := ofType(e.events(s.ID), berth.EventTurnStarted)
	var d live.TurnStartedData
	if err := json.Unmarshal(started[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Text != "echo hi" || len(d.Content) != 5 {
		t.Fatalf("turn_started = %s", started[0].Data)
	}
	if im := d.Content[1]; im.Data != img || im.Bytes != 8 || im.MimeType != "image/png" {
		t.Errorf("stored image = %+v", im)
	}
	if f := d.Content[3]; f.Type != berth.ContentResource || f.Path != "notes.txt" || f.Text != "hello notes" || f.Bytes != 11 {
		t.Errorf("stored file = %+v, want the resource berth read", f)
	}
	tr, err := e.m.Transcript(context.Background(), s.ID)
	if err != nil || len(tr) != 1 || len(tr[0].Content) != 5 || tr[0].Prompt != "echo hi" {
		t.Fatalf("transcript = %+v, %v", tr, err)
	}
	// An agent that cannot reopen the conversation is told what was attached.
	pre, err := e.m.transcripts.transcriptPreamble(context.Background(), s.ID)
	if err != nil || !strings.Contains(pre, "User attached: image image/png (8 bytes)") || !strings.Contains(pre, "User attached: file notes.txt (11 bytes)") {
		t.Errorf("replayed transcript = %q, %v", pre, err)
	}
}

func TestContentRefusedWritesNothing(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxPromptBytes = 1000 })
	s := e.create(berth.CreateRequest{})
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(s.Workspace, "link")))
	must(os.Symlink("../"+filepath.Base(outside), filepath.Join(s.Workspace, "dirlink")))
	must(os.Mkdir(filepath.Join(s.Workspace, "dir"), 0o755))
	must(syscall.Mkfifo(filepath.Join(s.Workspace, "fifo"), 0o644))
	must(os.WriteFile(filepath.Join(s.Workspace, "big"), make([]byte, 2000), 0o644))
	must(os.WriteFile(filepath.Join(s.Workspace, "empty"), nil, 0o644))
	before := len(e.events(s.ID))
	audio := base64.StdEncoding.EncodeToString([]byte("RIFF"))
	cases := []struct {
		name  string
		block berth.ContentBlock
		code  string
		says  string
	}{
		{"audio the agent lacks", berth.ContentBlock{Type: berth.ContentAudio, MimeType: "audio/wav", Data: audio}, berth.EInvalid, "audio"},
		{"a path out", berth.ContentBlock{Type: berth.ContentFile, Path: "../../etc/passwd"}, berth.EInvalid, "outside"},
		{"an absolute path out", berth.ContentBlock{Type: berth.ContentFile, Path: filepath.Join(outside, "secret")}, berth.EInvalid, "outside"},
		{"a symlink out", berth.ContentBlock{Type: berth.ContentFile, Path: "link"}, berth.EInvalid, "outside"},
		{"through a dir symlink out", berth.ContentBlock{Type: berth.ContentFile, Path: "dirlink/secret"}, berth.EInvalid, "outside"},
		{"a directory", berth.ContentBlock{Type: berth.ContentFile, Path: "dir"}, berth.EInvalid, "directory"},
		{"a fifo", berth.ContentBlock{Type: berth.ContentFile, Path: "fifo"}, berth.EInvalid, "regular"},
		{"a missing file", berth.ContentBlock{Type: berth.ContentFile, Path: "nope"}, berth.EInvalid, "no such"},
		{"an empty file", berth.ContentBlock{Type: berth.ContentFile, Path: "empty"}, berth.EInvalid, "empty"},
		{"a file over the cap", berth.ContentBlock{Type: berth.ContentFile, Path: "big"}, berth.ETooLarge, "max_prompt_bytes"},
	}
	for _, c := range cases {
		_, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Content: []berth.ContentBlock{
			{Type: berth.ContentText, Text: "echo x"}, c.block}})
		if !berth.IsCode(err, c.code) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, c.code, c.says)
		}
	}
	if err := e.log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.events(s.ID)); n != before {
		t.Errorf("refused prompts wrote %d events", n-before)
	}
	if q, _ := e.m.ListQueue(context.Background(), s.ID); len(q.Entries) != 0 {
		t.Errorf("refused prompts queued %v", q.Entries)
	}
}

func TestContentQueuedKeepsItsBlocks(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = time.Hour })
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	first, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "sleep 60000"})
	if err != nil {
		t.Fatal(err)
	}
	img := base64.StdEncoding.EncodeToString(pngBytes)
	q, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Content: []berth.ContentBlock{
		{Type: berth.ContentImage, MimeType: "image/png", Data: img}}})
	if err != nil || q.Status != "queued" {
		t.Fatalf("queue: %+v, %v", q, err)
	}
	view, err := e.m.ListQueue(ctx, s.ID)
	if err != nil || len(view.Entries) != 1 || len(view.Entries[0].Content) != 1 || view.Entries[0].Content[0].Data != img {
		t.Fatalf("queue = %+v, %v", view, err)
	}
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := e.m.WaitTurn(ctx, s.ID, first.TurnID); err != nil || r.StopReason != berth.TurnCancelled {
		t.Fatalf("first turn: %+v, %v", r, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := e.m.WaitTurn(wctx, s.ID, q.EntryID)
	if err != nil || !strings.Contains(res.Text, "image image/png 8") {
		t.Fatalf("queued turn: %+v, %v", res, err)
	}
}

func TestContentInterruptsAndSteers(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = time.Hour })
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	img := base64.StdEncoding.EncodeToString(pngBytes)
	blocks := []berth.ContentBlock{{Type: berth.ContentText, Text: "echo now"}, {Type: berth.ContentImage, MimeType: "image/png", Data: img}}
	e.startBusy(s.ID, "sleep 60000")
	r, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Content: blocks, Mode: berth.ModeInterrupt})
	if err != nil || r.Status != "started" {
		t.Fatalf("interrupt: %+v, %v", r, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := e.m.WaitTurn(wctx, s.ID, r.TurnID)
	if err != nil || !strings.Contains(res.Text, "image image/png 8") || !strings.Contains(res.Text, "now") {
		t.Fatalf("interrupting turn: %+v, %v", res, err)
	}
	// A steer staged with content runs as the next turn when the turn in
	// flight has no tool call to take it at.
	busy := e.startBusy(s.ID, "sleep 300")
	st, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Content: blocks, Mode: berth.ModeSteer})
	if err != nil || st.Status != "staged" {
		t.Fatalf("steer: %+v, %v", st, err)
	}
	if _, err := e.m.WaitTurn(wctx, s.ID, busy); err != nil {
		t.Fatal(err)
	}
	res, err = e.m.WaitTurn(wctx, s.ID, st.EntryID)
	if err != nil || !strings.Contains(res.Text, "image image/png 8") {
		t.Fatalf("steered turn: %+v, %v", res, err)
	}
}

func TestContentTheAgentCannotTakeDoesNotResumeIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	before := len(e.events(s.ID))
	audio := base64.StdEncoding.EncodeToString([]byte("RIFF"))
	_, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Content: []berth.ContentBlock{{Type: berth.ContentAudio, MimeType: "audio/wav", Data: audio}}})
	if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "audio") {
		t.Fatalf("audio to a stopped demo session = %v, want invalid naming audio", err)
	}
	if got, _ := e.m.GetSession(ctx, s.ID); got.State != berth.StateStopped || len(e.events(s.ID)) != before {
		t.Fatalf("the refused prompt resumed the session (%s) or logged %d events", got.State, len(e.events(s.ID))-before)
	}
	// What it can take resumes it and runs.
	res := e.promptContent(s.ID, berth.ContentBlock{Type: berth.ContentText, Text: "echo back"})
	if res.Text != "back" {
		t.Fatalf("turn after resume = %+v", res)
	}
}

// A queued content prompt outlives the daemon: after a restart, resuming
// the session runs it with its blocks.
func TestContentQueuedSurvivesARestart(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = time.Hour })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.startBusy(s.ID, "sleep 60000")
	img := base64.StdEncoding.EncodeToString(pngBytes)
	q, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Content: []berth.ContentBlock{
		{Type: berth.ContentText, Text: "echo later"}, {Type: berth.ContentImage, MimeType: "image/png", Data: img}}})
	if err != nil || q.Status != "queued" {
		t.Fatalf("queue: %+v, %v", q, err)
	}
	e.close()
	e.open()
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil && !berth.IsCode(err, berth.EConflict) {
		t.Fatal(err)
	}
	var text string
	waitFor(t, "the queued content prompt to run", func() bool {
		tr, err := e.m.Transcript(ctx, s.ID)
		if err != nil {
			return false
		}
		for _, turn := range tr {
			if len(turn.Content) == 2 && turn.StopReason != "" {
				text = turn.Text
				return true
			}
		}
		return false
	})
	if !strings.Contains(text, "image image/png 8") || !strings.Contains(text, "later") {
		t.Fatalf("the queued turn said %q", text)
	}
}
