package demoagent

import (
	"encoding/base64"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
)

// promptCapabilities is what the demo agent takes in a prompt beyond text
// and resource links (docs/api.md, "Prompt content"): images and embedded
// resources, not audio.
var promptCapabilities = acp.PromptCapabilities{Image: true, EmbeddedContext: true}

// answerContent says, one message each and in order, what the prompt's
// blocks other than text were: "image MIME BYTES", "resource URI BYTES"
// (BYTES decoded), "resource_link URI", "audio MIME BYTES".
func (t *turn) answerContent(blocks []acp.ContentBlock) error {
	for _, c := range blocks {
		var msg string
		switch {
		case c.Image != nil:
			msg = fmt.Sprintf("image %s %d", c.Image.MimeType, decodedLen(c.Image.Data))
		case c.Audio != nil:
			msg = fmt.Sprintf("audio %s %d", c.Audio.MimeType, decodedLen(c.Audio.Data))
		case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
			r := c.Resource.Resource.TextResourceContents
			msg = fmt.Sprintf("resource %s %d", r.Uri, len(r.Text))
		case c.Resource != nil && c.Resource.Resource.BlobResourceContents != nil:
			r := c.Resource.Resource.BlobResourceContents
			msg = fmt.Sprintf("resource %s %d", r.Uri, decodedLen(r.Blob))
		case c.ResourceLink != nil:
			msg = "resource_link " + c.ResourceLink.Uri
		default:
			continue
		}
		if err := t.say(msg); err != nil {
			return err
		}
	}
	return nil
}

// decodedLen is the size of base64 data, -1 when it is not base64.
func decodedLen(s string) int {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return -1
	}
	return len(b)
}
