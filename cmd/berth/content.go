package main

import (
	"encoding/base64"
	"net/http"
	"os"
	"strings"

	"github.com/berth-sh/berth"
)

// maxImageBytes bounds an image `berth prompt --image` reads; the daemon
// refuses a prompt over its own limits.max_prompt_bytes anyway.
const maxImageBytes = 64 << 20

// promptContent builds a content prompt: text (when any), then a file
// block per workspace path, then an image block per local image file.
func promptContent(text string, files, images []string) ([]berth.ContentBlock, error) {
	var out []berth.ContentBlock
	if strings.TrimSpace(text) != "" {
		out = append(out, berth.ContentBlock{Type: berth.ContentText, Text: text})
	}
	for _, f := range files {
		out = append(out, berth.ContentBlock{Type: berth.ContentFile, Path: f})
	}
	for _, p := range images {
		b, err := readImage(p)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// readImage reads a local image file into an image block; its type comes
// from its first bytes, not its name. EInvalid when it is not an image.
func readImage(p string) (berth.ContentBlock, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return berth.ContentBlock{}, berth.WrapError(berth.EInvalid, err, "--image %s", p)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxImageBytes {
		return berth.ContentBlock{}, berth.Errorf(berth.EInvalid, "--image %s: not a regular file of at most 64 MiB", p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return berth.ContentBlock{}, berth.WrapError(berth.EInvalid, err, "--image %s", p)
	}
	mime, _, _ := strings.Cut(http.DetectContentType(data), ";")
	if !strings.HasPrefix(mime, "image/") {
		return berth.ContentBlock{}, berth.Errorf(berth.EInvalid, "--image %s: not an image (its content is %s)", p, mime)
	}
	return berth.ContentBlock{Type: berth.ContentImage, MimeType: mime, Data: base64.StdEncoding.EncodeToString(data)}, nil
}
