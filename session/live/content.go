package live

import (
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

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
			r, err := ls.readPromptFile(b.Path, maxBytes-total)
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

// readPromptFile reads a workspace file named by a file block into a
// resource block: its text when it is UTF-8, else its bytes as base64.
// The path is resolved the way the agent's own file reads are (openConfined:
// no symbolic link out of the workspace, no hidden path); a directory or
// a special file is EInvalid, a file over room bytes ETooLarge.
func (ls *Session) readPromptFile(p string, room int) (berth.ContentBlock, error) {
	bad := func(reason string) error {
		return &berth.Error{Code: berth.EInvalid, Message: "file " + p + ": " + reason, Details: map[string]any{"path": p}}
	}
	rel, ok := ls.relPath(p)
	if !ok || rel == "." || ls.root == nil {
		return berth.ContentBlock{}, bad("outside the session's workspace")
	}
	// O_NONBLOCK: a FIFO in the workspace must not block the daemon.
	f, err := ls.openConfined(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0, false)
	if reason := refusal(err); reason != "" {
		return berth.ContentBlock{}, bad(reason)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return berth.ContentBlock{}, bad("no such file in the workspace")
	case err != nil:
		return berth.ContentBlock{}, bad("cannot be read")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return berth.ContentBlock{}, bad("cannot be read")
	}
	if fi.IsDir() {
		return berth.ContentBlock{}, bad("is a directory")
	}
	if !fi.Mode().IsRegular() {
		return berth.ContentBlock{}, bad("is not a regular file")
	}
	if fi.Size() == 0 {
		// ACP's resource needs its text or blob: an empty one says nothing.
		return berth.ContentBlock{}, bad("is empty")
	}
	if (room > 0 && fi.Size() > int64(room)) || fi.Size() > maxReadBytes {
		// Over what is left of the prompt cap, or (with no cap) over what
		// the agent's own reads may take: never read whole into memory.
		return berth.ContentBlock{}, berth.TooLarge(int(min(fi.Size(), 1<<40)), ls.h.Limits.MaxPromptBytes)
	}
	data := make([]byte, fi.Size())
	n, err := readFull(f, data)
	if err != nil {
		return berth.ContentBlock{}, bad("cannot be read")
	}
	data = data[:n]
	out := berth.ContentBlock{Type: berth.ContentResource, Path: filepath.ToSlash(rel), Bytes: n,
		URI: "file://" + filepath.Join(ls.workspace, rel), MimeType: mimeOf(rel, data)}
	if utf8.Valid(data) {
		out.Text = string(data)
	} else {
		out.Blob = base64.StdEncoding.EncodeToString(data)
	}
	return out, nil
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
