package berth

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"
)

// Content block types a prompt may carry (docs/api.md, "Prompt content"). All
// but ContentFile are ACP's; a file block names a file in the workspace and is
// sent to the agent as an embedded resource.
const (
	ContentText         = "text"
	ContentImage        = "image"
	ContentAudio        = "audio"
	ContentResource     = "resource"
	ContentResourceLink = "resource_link"
	ContentFile         = "file"
)

// ContentBlock is one piece of a prompt in the API's form. Which fields a
// block uses depends on its Type:
//   - text: Text
//   - image, audio: MimeType, Data (base64), URI optional for an image
//   - resource: URI and exactly one of Text or Blob (base64), MimeType optional
//   - resource_link: URI, Name optional (the URI's last element), MimeType optional
//   - file: Path (relative to the workspace, or absolute inside it)
//
// Once berth has resolved a file block (when it accepts the prompt), the
// block is a resource that also keeps its Path, and Bytes is its size.
type ContentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	Data     string `json:"data,omitempty"`
	URI      string `json:"uri,omitempty"`
	Name     string `json:"name,omitempty"`
	Blob     string `json:"blob,omitempty"`
	Path     string `json:"path,omitempty"`
	// Bytes is set by berth: the size of the block's payload (decoded data
	// or blob, text or file content).
	Bytes int `json:"bytes,omitempty"`
}

// Size is what the block counts against limits.max_prompt_bytes: its
// payload as sent to the agent (base64 counted as encoded).
func (b *ContentBlock) Size() int {
	return len(b.Text) + len(b.Data) + len(b.Blob) + len(b.URI) + len(b.Name)
}

// validate checks the block's shape; i is its index, for the message.
func (b *ContentBlock) validate(i int) error {
	bad := func(format string, a ...any) error {
		return &Error{Code: EInvalid, Message: fmt.Sprintf("content[%d]: ", i) + fmt.Sprintf(format, a...),
			Details: map[string]any{"index": i, "type": b.Type}}
	}
	// used lists the fields the type takes; any other set field is refused.
	var used string
	switch b.Type {
	case ContentText:
		used = "text"
		if b.Text == "" {
			return bad("a text block needs text")
		}
	case ContentImage, ContentAudio:
		used = "mime_type data uri"
		if b.Type == ContentAudio {
			used = "mime_type data"
		}
		if !strings.HasPrefix(b.MimeType, b.Type+"/") {
			return bad("an %s block needs a mime_type %s/…", b.Type, b.Type)
		}
		if b.Data == "" {
			return bad("an %s block needs data (base64)", b.Type)
		}
		if _, err := base64.StdEncoding.DecodeString(b.Data); err != nil {
			return bad("data is not base64")
		}
	case ContentResource:
		used = "uri text blob mime_type"
		if b.URI == "" {
			return bad("a resource block needs a uri")
		}
		if (b.Text == "") == (b.Blob == "") {
			return bad("a resource block needs exactly one of text or blob")
		}
		if b.Blob != "" {
			if _, err := base64.StdEncoding.DecodeString(b.Blob); err != nil {
				return bad("blob is not base64")
			}
		}
	case ContentResourceLink:
		used = "uri name mime_type"
		if b.URI == "" {
			return bad("a resource_link block needs a uri")
		}
	case ContentFile:
		used = "path"
		if strings.TrimSpace(b.Path) == "" {
			return bad("a file block needs a path")
		}
	case "":
		return bad("a block needs a type")
	default:
		return bad("unknown content type %q (text, image, audio, resource, resource_link, file)", b.Type)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"text", b.Text != ""}, {"mime_type", b.MimeType != ""}, {"data", b.Data != ""}, {"uri", b.URI != ""},
		{"name", b.Name != ""}, {"blob", b.Blob != ""}, {"path", b.Path != ""}, {"bytes", b.Bytes != 0}} {
		if f.set && !strings.Contains(" "+used+" ", " "+f.name+" ") {
			return bad("a %s block takes no %s", b.Type, f.name)
		}
	}
	return nil
}

// LinkName is the name a resource_link is sent with: its Name, else the
// last element of its URI.
func (b *ContentBlock) LinkName() string {
	if b.Name != "" {
		return b.Name
	}
	if n := path.Base(b.URI); n != "." && n != "/" {
		return n
	}
	return b.URI
}

// ContentTextOf joins the text of a prompt's text blocks: what the turn's
// text says of it.
func ContentTextOf(blocks []ContentBlock) string {
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type == ContentText {
			if sb.Len() > 0 {
				sb.WriteString("\n")
			}
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// ContentSize is the size of blocks against limits.max_prompt_bytes.
func ContentSize(blocks []ContentBlock) int {
	n := 0
	for i := range blocks {
		n += blocks[i].Size()
	}
	return n
}

// TooLarge is the ETooLarge error of a prompt of n bytes over maxBytes.
func TooLarge(n, maxBytes int) error {
	return &Error{Code: ETooLarge, Message: "prompt is larger than limits.max_prompt_bytes",
		Details: map[string]any{"max_bytes": maxBytes, "bytes": n}}
}
