package transcript

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/berth-sh/berth"
)

// Preamble is an earlier conversation rendered for an agent that has to
// start it over, bounded (maxPreamble): the newest turns are what the
// agent needs most, so the oldest go once the whole is past its bound.
// The zero Preamble is empty.
type Preamble struct {
	turns []string
	size  int
}

// Add appends a rendered turn (RenderTurn).
func (p *Preamble) Add(turn string) {
	p.turns, p.size = append(p.turns, turn), p.size+len(turn)
	for p.size > maxPreamble && len(p.turns) > 1 {
		p.size -= len(p.turns[0])
		p.turns = p.turns[1:]
	}
}

// String is the preamble under its first line head; "" when there was no
// turn.
func (p *Preamble) String(head string) string {
	if len(p.turns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(head)
	for _, t := range p.turns {
		b.WriteString(t)
	}
	b.WriteString("[berth: end of the earlier conversation; the new prompt follows]\n")
	return b.String()
}

// maxPreamble bounds the earlier conversation a new one is given, and
// MaxPreambleTurn each turn's text in it: an agent's context is far
// smaller, and a flooding turn's text is tens of MB.
const (
	maxPreamble     = 2 << 20
	MaxPreambleTurn = 256 << 10
)

// RenderTurn renders one turn for a preamble, its text up to max bytes; a
// text too long to be kept (t.Long) is read up to max bytes from the log.
func RenderTurn(ctx context.Context, t *berth.TranscriptTurn, max int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "User: %s\n", t.Prompt)
	for _, c := range t.Content {
		// What was attached is named; its bytes are not sent again.
		if c.Type != berth.ContentText {
			fmt.Fprintf(&b, "User attached: %s\n", attachmentLine(&c))
		}
	}
	for _, c := range t.ToolCalls {
		fmt.Fprintf(&b, "Tool call (%s, %s): %s\n", c.Kind, c.Status, c.Title)
	}
	text := ClipText(t.Text, max)
	if t.Long != nil {
		var err error
		if text, err = t.Long.Head(ctx, max); err != nil {
			return "", err
		}
	}
	if text != "" {
		fmt.Fprintf(&b, "Assistant: %s\n", text)
	}
	return b.String(), nil
}

// attachmentLine names a non-text block for a transcript replayed as text.
func attachmentLine(b *berth.ContentBlock) string {
	switch {
	case b.Path != "":
		return fmt.Sprintf("file %s (%d bytes)", b.Path, b.Bytes)
	case b.Type == berth.ContentImage || b.Type == berth.ContentAudio:
		return fmt.Sprintf("%s %s (%d bytes)", b.Type, b.MimeType, b.Bytes)
	}
	return fmt.Sprintf("%s %s", b.Type, b.URI)
}

// ClipText is s up to max bytes, cut on a character's start.
func ClipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
