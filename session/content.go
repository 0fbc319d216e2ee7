package session

import (
	"fmt"

	"github.com/berth-sh/berth"
)

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
