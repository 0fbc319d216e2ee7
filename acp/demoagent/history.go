package demoagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// Record types of a history file.
const (
	recSession = "session" // first line: the session was created (Cwd)
	recUser    = "user"    // a prompt (Text)
	recAgent   = "agent"   // an agent_message_chunk (Text, Repeat)
	recThought = "thought" // an agent_thought_chunk (Text)
)

// record is one line of a session's history: what was said, exactly as it
// was sent, so a replay concatenates to the same text.
type record struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
	// Repeat > 1 means Text was sent that many times in a row (flood).
	Repeat int `json:"repeat,omitempty"`
	// Mode, Model and Verbosity are a controls record's values.
	Mode      string `json:"mode,omitempty"`
	Model     string `json:"model,omitempty"`
	Verbosity string `json:"verbosity,omitempty"`
}

// errNoHistory means no stored conversation exists for a session id.
var errNoHistory = errors.New("no such session history")

// validID reports whether a session id can name a history file: 1 to 128
// of A-Z, a-z, 0-9, '_' and '-'. (A loop, not a regexp: compiling one at
// package init costs every berth process a millisecond.)
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// historyLog is the append-only conversation of one session: a JSON-lines
// file <state-dir>/<id>.jsonl, or memory when there is no state dir. Each
// record is written with one write(2) as the turn happens, so a crash or a
// kill keeps everything said before it.
type historyLog struct {
	mu   sync.Mutex
	path string   // "": in memory
	f    *os.File // the open file when path is set
	mem  []record
}

func historyPath(dir, id string) string { return filepath.Join(dir, id+".jsonl") }

// createHistory starts the history of a new session.
func createHistory(dir, id, cwd string) (*historyLog, error) {
	h := &historyLog{}
	if dir != "" {
		h.path = historyPath(dir, id)
		f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create session history: %w", err)
		}
		h.f = f
	}
	if err := h.append(record{Type: recSession, Cwd: cwd}); err != nil {
		_ = h.close()
		return nil, err
	}
	return h, nil
}

// openHistory reopens the stored history of id for appending; errNoHistory
// when there is none (or no state dir, or an id that cannot name a file).
func openHistory(dir, id string) (*historyLog, error) {
	if dir == "" || !validID(id) {
		return nil, errNoHistory
	}
	path := historyPath(dir, id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoHistory
	}
	if err != nil {
		return nil, fmt.Errorf("open session history: %w", err)
	}
	// A kill mid-write can leave a partial last line: end it so the next
	// record starts on a line of its own.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			_, _ = f.Write([]byte{'\n'})
		}
	}
	return &historyLog{path: path, f: f}, nil
}

// append adds one record.
func (h *historyLog) append(r record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.path == "" {
		h.mem = append(h.mem, r)
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = h.f.Write(append(b, '\n'))
	return err
}

// replay calls fn for each record in order. Lines that do not parse (a
// partial line left by a kill) are skipped.
func (h *historyLog) replay(fn func(record) error) error {
	if h.path == "" {
		h.mu.Lock()
		// Records are never modified, so a capped view is a safe snapshot.
		recs := h.mem[:len(h.mem):len(h.mem)]
		h.mu.Unlock()
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	f, err := os.Open(h.path)
	if err != nil {
		return fmt.Errorf("read session history: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		// ReadBytes has no line-length limit, unlike bufio.Scanner.
		line, rerr := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var r record
			if json.Unmarshal(line, &r) == nil {
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read session history: %w", rerr)
		}
	}
}

// close releases the file, if any; later appends fail.
func (h *historyLog) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	return h.f.Close()
}

// replayChunk is the most text one replayed notification carries.
const replayChunk = 64 << 10

// replayer turns history records into session/update notifications for
// session/load. Consecutive agent (or thought) records are coalesced into
// chunks of up to replayChunk bytes: the concatenated text is exactly what
// was said, in far fewer notifications (a replayed flood would otherwise
// overrun clients that bound their notification queue, like the Go SDK's
// 1024). Each prompt is one user_message_chunk.
type replayer struct {
	a    *agent
	ctx  context.Context
	sid  string
	kind string // record type buffered in buf
	buf  strings.Builder
}

// add takes one record.
func (r *replayer) add(rec record) error {
	switch rec.Type {
	case recUser:
		if err := r.flush(); err != nil {
			return err
		}
		return r.a.update(r.ctx, r.sid, acp.UpdateUserMessageText(rec.Text))
	case recAgent, recThought:
		for range max(rec.Repeat, 1) {
			if r.kind != rec.Type || (r.buf.Len() > 0 && r.buf.Len()+len(rec.Text) > replayChunk) {
				if err := r.flush(); err != nil {
					return err
				}
			}
			r.kind = rec.Type
			r.buf.WriteString(rec.Text)
		}
	}
	return nil
}

// flush sends what is buffered.
func (r *replayer) flush() error {
	kind, text := r.kind, r.buf.String()
	r.kind = ""
	r.buf.Reset()
	switch kind {
	case recAgent:
		return r.a.update(r.ctx, r.sid, acp.UpdateAgentMessageText(text))
	case recThought:
		return r.a.update(r.ctx, r.sid, acp.UpdateAgentThoughtText(text))
	}
	return nil
}
