package live

import (
	"context"
	"encoding/base64"
	"mime"
	"net/http"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// Input is one prompt as the session runs it: text, or content blocks
// (already resolved: a file block is the resource berth read) whose text
// blocks text joins.
type Input struct {
	text    string
	content []berth.ContentBlock
}

// empty reports whether there is no prompt.
func (in Input) empty() bool { return in.text == "" && len(in.content) == 0 }

// entryInput is the prompt a queue entry holds.
func entryInput(e *berth.QueueEntry) Input { return Input{text: e.Text, content: e.Content} }

// blocks is the prompt as ACP content, carry (the transcript an agent that
// could not reopen its conversation is given) first.
func (in Input) blocks(carry string) []acp.ContentBlock {
	if in.content == nil {
		return []acp.ContentBlock{acp.TextBlock(carry + in.text)}
	}
	out := make([]acp.ContentBlock, 0, len(in.content)+1)
	if carry != "" {
		out = append(out, acp.TextBlock(carry))
	}
	for i := range in.content {
		out = append(out, acpBlock(&in.content[i]))
	}
	return out
}

// acpBlock is one API content block as ACP sends it.
func acpBlock(b *berth.ContentBlock) acp.ContentBlock {
	switch b.Type {
	case berth.ContentImage, berth.ContentAudio:
		return acp.ContentBlock{Type: b.Type, MimeType: b.MimeType, Data: b.Data, URI: b.URI}
	case berth.ContentResource, berth.ContentFile:
		return acp.ContentBlock{Type: berth.ContentResource, Resource: &acp.ResourceContents{
			URI: b.URI, MimeType: b.MimeType, Text: b.Text, Blob: b.Blob}}
	case berth.ContentResourceLink:
		return acp.ContentBlock{Type: b.Type, URI: b.URI, Name: b.LinkName(), MimeType: b.MimeType}
	}
	return acp.TextBlock(b.Text)
}

// capabilityOf names the promptCapabilities flag a block kind needs ("" for
// none: text and resource_link every agent takes).
func capabilityOf(typ string, c acp.PromptCapabilities) (string, bool) {
	switch typ {
	case berth.ContentImage:
		return "image", c.Image
	case berth.ContentAudio:
		return "audio", c.Audio
	case berth.ContentResource, berth.ContentFile:
		return "embeddedContext", c.EmbeddedContext
	}
	return "", true
}

// ResolveInput turns a prompt request into the input the session runs:
// every block is checked against the agent's promptCapabilities, each
// file block is read from the workspace into a resource, and the whole is
// checked against limits.max_prompt_bytes. Nothing is written.
func (ls *Session) ResolveInput(ctx context.Context, req berth.PromptRequest) (Input, error) {
	if req.Content == nil {
		return Input{text: req.Text}, nil
	}
	ls.mu.Lock()
	caps := acp.PromptCapabilitiesOf(ls.sess.ACP.Capabilities)
	ls.mu.Unlock()
	maxBytes := ls.h.Limits.MaxPromptBytes
	out := make([]berth.ContentBlock, len(req.Content))
	total := 0
	if err := CheckCapabilities(req.Content, caps); err != nil {
		return Input{}, err
	}
	for i, b := range req.Content {
		if b.Type == berth.ContentFile {
			r, err := ls.files.readPromptFile(b.Path, maxBytes-total)
			if err != nil {
				return Input{}, err
			}
			b = r
		} else {
			b.Bytes = payloadBytes(&b)
		}
		total += b.Size()
		if maxBytes > 0 && total > maxBytes {
			return Input{}, berth.TooLarge(total, maxBytes)
		}
		out[i] = b
	}
	return Input{text: berth.ContentTextOf(out), content: out}, nil
}

// payloadBytes is the decoded size of a block's payload.
func payloadBytes(b *berth.ContentBlock) int {
	switch {
	case b.Data != "":
		return base64.StdEncoding.DecodedLen(len(b.Data)) - padding(b.Data)
	case b.Blob != "":
		return base64.StdEncoding.DecodedLen(len(b.Blob)) - padding(b.Blob)
	}
	return len(b.Text)
}

// padding counts a base64 string's trailing '='.
func padding(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '='; i-- {
		n++
	}
	return n
}

// mimeOf guesses a file's media type from its name, else its first bytes.
func mimeOf(name string, data []byte) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}

// CheckCapabilities refuses a block of a kind the agent's
// promptCapabilities lack (EInvalid naming it).
func CheckCapabilities(blocks []berth.ContentBlock, caps acp.PromptCapabilities) error {
	for i, b := range blocks {
		if name, ok := capabilityOf(b.Type, caps); !ok {
			return &berth.Error{Code: berth.EInvalid,
				Message: "the agent does not take " + b.Type + " content (its promptCapabilities lack " + name + ")",
				Details: map[string]any{"index": i, "type": b.Type, "capability": name}}
		}
	}
	return nil
}
