package live

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

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

// files is the agent's workspace as the file service sees it: confined
// to the workspace, never showing a hidden path (the daemon's own, Host
// Hidden). Set by open (wire) before the agent's requests are served;
// afterLstat is set by tests only.
type files struct {
	ls     *Session
	root   *os.Root        // the workspace, for confined fs access
	wsReal string          // the workspace with symlinks resolved
	hidden map[fileID]bool // the hidden paths' identities, refused by the file service
	// afterLstat, set by tests only, runs in openConfined between looking
	// at a path component and opening it: where a swap would race.
	afterLstat func(name string)
}

// open opens the workspace for the file service and notes the hidden
// paths' identities.
func (f *files) open() {
	ls := f.ls
	var err error
	if f.wsReal, err = filepath.EvalSymlinks(ls.workspace); err != nil {
		f.wsReal = ls.workspace
	}
	if f.root, err = os.OpenRoot(f.wsReal); err != nil {
		ls.logger.Warn("workspace root", "err", err)
	}
	f.hidden = f.hiddenIDs()
}

// close closes the workspace once the agent's requests are done.
func (f *files) close() {
	if f.root != nil {
		_ = f.root.Close()
	}
}

// workDir is the directory a command asked to run in cwd ("" for the
// workspace) runs in: inside says cwd is in the workspace, resolves that
// it still is once its symbolic links are resolved.
func (f *files) workDir(cwd string) (dir string, inside, resolves bool) {
	ls := f.ls
	if cwd == "" {
		return ls.workspace, true, true
	}
	rel, ok := f.relPath(cwd)
	if !ok {
		return "", false, false
	}
	dir = filepath.Join(ls.workspace, rel)
	real, err := filepath.EvalSymlinks(dir)
	return dir, true, err == nil && pathx.Within(f.wsReal, real)
}

// relPath returns p relative to the workspace, refusing paths that leave it
// lexically (after cleaning "..").
func (f *files) relPath(p string) (string, bool) {
	ls := f.ls
	if !filepath.IsAbs(p) {
		p = filepath.Join(ls.workspace, p)
	}
	p = filepath.Clean(p)
	for _, base := range []string{ls.workspace, f.wsReal} {
		if pathx.Within(base, p) {
			rel, _ := filepath.Rel(base, p)
			return rel, true
		}
	}
	return "", false
}

// refuse logs a refused file access and returns the error for the agent.
func (f *files) refuse(op, path, reason string) error {
	ls := f.ls
	ls.Emit(ls.turns.currentID(), berth.EventFileRefused, fileData{Path: path, Op: op, Reason: reason})
	return errOutside(path)
}

// errOutside is the JSON-RPC error for a path outside the workspace.
func errOutside(path string) *acp.Error {
	return &acp.Error{Code: acp.CodeInvalidParams, Message: "path is outside the session's workspace: " + path}
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
	ls, f := h.ls, &h.ls.files
	rel, ok := f.relPath(req.Path)
	if !ok || f.root == nil {
		return acp.ReadTextFileResponse{}, f.refuse("read", req.Path, "outside the workspace")
	}
	// O_NONBLOCK: opening a FIFO the agent made must not block the daemon.
	file, err := f.openConfined(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0, false)
	if reason := refusal(err); reason != "" {
		return acp.ReadTextFileResponse{}, f.refuse("read", req.Path, reason)
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, fileError(err, req.Path)
	}
	defer file.Close()
	fi, err := file.Stat()
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
	n, err := readFull(file, b)
	if err != nil {
		return acp.ReadTextFileResponse{}, fileError(err, req.Path)
	}
	content := selectLines(string(b[:n]), req.Line, req.Limit)
	ls.Emit(ls.turns.currentID(), berth.EventFileRead, fileData{Path: req.Path, Bytes: len(content)})
	return acp.ReadTextFileResponse{Content: content}, nil
}

// WriteTextFile serves fs/write_text_file inside the workspace only, and
// never under a hidden path, creating missing parent directories.
func (h *agentHandler) WriteTextFile(ctx context.Context, req acp.WriteTextFileRequest) error {
	ls, f := h.ls, &h.ls.files
	rel, ok := f.relPath(req.Path)
	if !ok || rel == "." || f.root == nil {
		return f.refuse("write", req.Path, "outside the workspace")
	}
	err := f.writeRegular(rel, req.Content)
	if reason := refusal(err); reason != "" {
		return f.refuse("write", req.Path, reason)
	}
	var rpcErr *acp.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	if err != nil {
		return fileError(err, req.Path)
	}
	ls.Emit(ls.turns.currentID(), berth.EventFileWritten, fileData{Path: req.Path, Bytes: len(req.Content)})
	return nil
}

// writeRegular replaces the content of a regular file in the workspace,
// creating it. It opens without blocking and refuses anything but a
// regular file, so a FIFO or device the agent made cannot hang the daemon.
func (f *files) writeRegular(rel, content string) error {
	ls := f.ls
	file, err := f.openConfined(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644, true)
	if errors.Is(err, syscall.ENXIO) {
		return &acp.Error{Code: acp.CodeInvalidParams, Message: "not a regular file: " + rel}
	}
	if err != nil {
		return err
	}
	defer file.Close()
	fi, err := file.Stat()
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
			if err := file.Chown(uid, gid); err != nil {
				return err
			}
		}
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	if _, err := file.WriteString(content); err != nil {
		return err
	}
	return file.Close()
}

// readPromptFile reads a workspace file named by a file block into a
// resource block: its text when it is UTF-8, else its bytes as base64.
// The path is resolved the way the agent's own file reads are (openConfined:
// no symbolic link out of the workspace, no hidden path); a directory or
// a special file is EInvalid, a file over room bytes ETooLarge.
func (f *files) readPromptFile(p string, room int) (berth.ContentBlock, error) {
	ls := f.ls
	bad := func(reason string) error {
		return &berth.Error{Code: berth.EInvalid, Message: "file " + p + ": " + reason, Details: map[string]any{"path": p}}
	}
	rel, ok := f.relPath(p)
	if !ok || rel == "." || f.root == nil {
		return berth.ContentBlock{}, bad("outside the session's workspace")
	}
	// O_NONBLOCK: a FIFO in the workspace must not block the daemon.
	file, err := f.openConfined(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0, false)
	if reason := refusal(err); reason != "" {
		return berth.ContentBlock{}, bad(reason)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return berth.ContentBlock{}, bad("no such file in the workspace")
	case err != nil:
		return berth.ContentBlock{}, bad("cannot be read")
	}
	defer file.Close()
	fi, err := file.Stat()
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
	n, err := readFull(file, data)
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
