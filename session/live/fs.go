package live

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/pathx"
)

// maxReadBytes caps a file the agent reads through berth, well under the
// transport's line cap.
const maxReadBytes = 32 << 20

// fileData is the data of file_read, file_written and file_refused.
type fileData struct {
	Path   string `json:"path"`
	Bytes  int    `json:"bytes"`
	Op     string `json:"op,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// errOutside is the JSON-RPC error for a path outside the workspace.
func errOutside(path string) *acp.Error {
	return &acp.Error{Code: acp.CodeInvalidParams, Message: "path is outside the session's workspace: " + path}
}

// relPath returns p relative to the workspace, refusing paths that leave it
// lexically (after cleaning "..").
func (ls *Session) relPath(p string) (string, bool) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(ls.workspace, p)
	}
	p = filepath.Clean(p)
	for _, base := range []string{ls.workspace, ls.wsReal} {
		if pathx.Within(base, p) {
			rel, _ := filepath.Rel(base, p)
			return rel, true
		}
	}
	return "", false
}

// refuse logs a refused file access and returns the error for the agent.
func (ls *Session) refuse(op, path, reason string) error {
	ls.Emit(ls.currentTurnID(), berth.EventFileRefused, fileData{Path: path, Op: op, Reason: reason})
	return errOutside(path)
}

// refusal is the reason to refuse a file access that failed with err
// (see openConfined), or "" when err is not a refusal.
func refusal(err error) string {
	switch {
	case errors.Is(err, errEscape), err != nil && strings.Contains(err.Error(), "path escapes from parent"):
		return "resolves outside the workspace"
	case errors.Is(err, errHidden):
		return "resolves to a path hidden from sessions"
	case errors.Is(err, errSwapped):
		return "changed while it was opened"
	}
	return ""
}

// ReadTextFile serves fs/read_text_file inside the workspace only, and
// never from a hidden path (the daemon's home, Options.Hidden) in it; see
// openConfined.
func (h *agentHandler) ReadTextFile(ctx context.Context, req acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	ls := h.rt
	rel, ok := ls.relPath(req.Path)
	if !ok || ls.root == nil {
		return acp.ReadTextFileResponse{}, ls.refuse("read", req.Path, "outside the workspace")
	}
	// O_NONBLOCK: opening a FIFO the agent made must not block the daemon.
	f, err := ls.openConfined(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0, false)
	if reason := refusal(err); reason != "" {
		return acp.ReadTextFileResponse{}, ls.refuse("read", req.Path, reason)
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, fileError(err, req.Path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return acp.ReadTextFileResponse{}, fileError(err, req.Path)
	}
	if !fi.Mode().IsRegular() {
		return acp.ReadTextFileResponse{}, &acp.Error{Code: acp.CodeInvalidParams, Message: "not a regular file: " + req.Path}
	}
	if fi.Size() > maxReadBytes {
		return acp.ReadTextFileResponse{}, &acp.Error{Code: acp.CodeInvalidParams, Message: "file is larger than 32 MiB: " + req.Path}
	}
	b := make([]byte, fi.Size())
	n, err := readFull(f, b)
	if err != nil {
		return acp.ReadTextFileResponse{}, fileError(err, req.Path)
	}
	content := selectLines(string(b[:n]), req.Line, req.Limit)
	ls.Emit(ls.currentTurnID(), berth.EventFileRead, fileData{Path: req.Path, Bytes: len(content)})
	return acp.ReadTextFileResponse{Content: content}, nil
}

// WriteTextFile serves fs/write_text_file inside the workspace only, and
// never under a hidden path, creating missing parent directories.
func (h *agentHandler) WriteTextFile(ctx context.Context, req acp.WriteTextFileRequest) error {
	ls := h.rt
	rel, ok := ls.relPath(req.Path)
	if !ok || rel == "." || ls.root == nil {
		return ls.refuse("write", req.Path, "outside the workspace")
	}
	err := ls.writeRegular(rel, req.Content)
	if reason := refusal(err); reason != "" {
		return ls.refuse("write", req.Path, reason)
	}
	var rpcErr *acp.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	if err != nil {
		return fileError(err, req.Path)
	}
	ls.Emit(ls.currentTurnID(), berth.EventFileWritten, fileData{Path: req.Path, Bytes: len(req.Content)})
	return nil
}

// writeRegular replaces the content of a regular file in the workspace,
// creating it. It opens without blocking and refuses anything but a
// regular file, so a FIFO or device the agent made cannot hang the daemon.
func (ls *Session) writeRegular(rel, content string) error {
	f, err := ls.openConfined(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644, true)
	if errors.Is(err, syscall.ENXIO) {
		return &acp.Error{Code: acp.CodeInvalidParams, Message: "not a regular file: " + rel}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &acp.Error{Code: acp.CodeInvalidParams, Message: "not a regular file: " + rel}
	}
	if uid, gid, ok := ls.box.fileOwner(); ok {
		// A file the daemon made (or one of root's) becomes the agent's,
		// so that it can change it; never one with other links.
		if st, is := fi.Sys().(*syscall.Stat_t); is && st.Uid == 0 && st.Nlink == 1 {
			if err := f.Chown(uid, gid); err != nil {
				return err
			}
		}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		return err
	}
	return f.Close()
}

// fileError turns a file system error into a JSON-RPC error for the agent.
func fileError(err error, path string) *acp.Error {
	if errors.Is(err, fs.ErrNotExist) {
		return &acp.Error{Code: acp.CodeResourceNotFound, Message: "file not found: " + path}
	}
	if errors.Is(err, fs.ErrPermission) {
		return &acp.Error{Code: acp.CodeInvalidParams, Message: "permission denied: " + path}
	}
	return &acp.Error{Code: acp.CodeInternal, Message: "file access failed: " + path}
}

// readFull reads into b until it is full or the file ends.
func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
	return n, nil
}

// selectLines applies ACP's 1-based line and limit to content.
func selectLines(content string, line, limit *int) string {
	if line == nil && limit == nil {
		return content
	}
	lines := strings.SplitAfter(content, "\n")
	start := 0
	if line != nil && *line > 1 {
		start = min(*line-1, len(lines))
	}
	end := len(lines)
	if limit != nil && *limit >= 0 {
		end = min(start+*limit, len(lines))
	}
	return strings.Join(lines[start:end], "")
}
