// Package codec is what berth's store backends share: the stored form of
// the records (times as unix nanoseconds, the session document, list
// cursors, event column values, per-turn seq ranges, how an event page is
// answered, the embedded numbered migrations), the checks every backend
// makes of what it is given, the sorting of a one-row read's error, and
// the column lists and scanners of the rows the two SQL backends read
// alike. It holds no statement: each backend keeps its own statements and
// schema.
package codec

import (
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
)

// sessionDoc is the JSON kept in a session row's document: the API fields
// plus the ones their json:"-" tags hide from the API but the daemon needs
// back after a restart. AgentOffset is not one of them: like LastSeq it has
// a column of its own.
type sessionDoc struct {
	*berth.Session
	Env        map[string]string `json:"env,omitempty"`
	AgentPID   int               `json:"agent_pid,omitempty"`
	NeedsAuth  bool              `json:"needs_auth,omitempty"`
	ShimSocket string            `json:"shim_socket,omitempty"`
	ShimPID    int               `json:"shim_pid,omitempty"`
	SpawnKey   string            `json:"spawn_key,omitempty"`
	SpawnHash  string            `json:"spawn_hash,omitempty"`

	// MCPServers shadows the Session's field of the same JSON name, whose
	// marshalling redacts secrets: the document keeps them whole.
	MCPServers []berth.MCPServer `json:"mcp_servers,omitempty"`
	// NoBerthTools is stored rather than BerthTools, so that a session
	// stored before berth_tools existed has them.
	NoBerthTools bool   `json:"no_berth_tools,omitempty"`
	ToolsHash    string `json:"tools_hash,omitempty"`
	// Worktree keeps the worktree's hidden fields beside the shown ones.
	Worktree *worktreeDoc `json:"worktree_dirs,omitempty"`
	// Usage shadows the Session's, left empty: the usage has columns of
	// its own (UsageColumns).
	Usage json.RawMessage `json:"usage,omitempty"`
	// Storage shadows the Session's, left empty: it has columns of its
	// own (StorageColumns).
	Storage json.RawMessage `json:"storage,omitempty"`
}

// StorageColumns are a session row's object store columns (migration
// 0028), in the order of ScanSession's targets after the usage: the
// synced seq and when (SortNanos; 0 for never).
const StorageColumns = `storage_seq, storage_at`

// StorageSync is the Session.Storage of the columns' values: nil for
// a session never synced.
func StorageSync(seq, at int64) *berth.StorageSync {
	if seq <= 0 {
		return nil
	}
	return &berth.StorageSync{SyncedSeq: seq, SyncedAt: FromNanos(at)}
}

// worktreeDoc is the stored part of a berth.Worktree the API hides.
type worktreeDoc struct {
	GitDir    string `json:"git_dir"`
	CommonDir string `json:"common_dir"`
	Owned     bool   `json:"owned,omitempty"`
}

// EncodeSession marshals s with its hidden fields. EInvalid for a session
// without an id, or one that cannot be encoded.
func EncodeSession(s *berth.Session) (string, error) {
	if s == nil || s.ID == "" {
		return "", berth.Errorf(berth.EInvalid, "session id must not be empty")
	}
	d := sessionDoc{Session: s, Env: s.Env, AgentPID: s.AgentPID, NeedsAuth: s.NeedsAuth,
		ShimSocket: s.ShimSocket, ShimPID: s.ShimPID, SpawnKey: s.SpawnKey, SpawnHash: s.SpawnHash, MCPServers: s.MCPServers,
		NoBerthTools: !s.BerthTools, ToolsHash: s.ToolsHash}
	if w := s.Worktree; w != nil {
		d.Worktree = &worktreeDoc{GitDir: w.GitDir, CommonDir: w.CommonDir, Owned: w.Owned}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", berth.WrapError(berth.EInvalid, err, "session cannot be encoded")
	}
	return string(b), nil
}

// DecodeSession is the inverse of EncodeSession; LastSeq and AgentOffset
// come from their columns (lastSeq, agentOffset), never from the document,
// and so does Usage (the caller sets it: UsageRow).
// EInternal for a document that does not decode.
func DecodeSession(doc []byte, lastSeq, agentOffset int64) (*berth.Session, error) {
	d := sessionDoc{Session: new(berth.Session)}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "decode stored session")
	}
	s := d.Session
	s.Env, s.AgentPID, s.NeedsAuth = d.Env, d.AgentPID, d.NeedsAuth
	s.ShimSocket, s.ShimPID = d.ShimSocket, d.ShimPID
	s.SpawnKey, s.SpawnHash = d.SpawnKey, d.SpawnHash
	s.MCPServers = d.MCPServers
	s.BerthTools, s.ToolsHash = !d.NoBerthTools, d.ToolsHash
	s.LastSeq, s.AgentOffset = lastSeq, agentOffset
	if s.Worktree != nil && d.Worktree != nil {
		s.Worktree.GitDir, s.Worktree.CommonDir, s.Worktree.Owned = d.Worktree.GitDir, d.Worktree.CommonDir, d.Worktree.Owned
	}
	if s.RootID == "" && s.ParentID == "" {
		// Written before sessions had trees: a root.
		s.RootID = s.ID
	}
	return s, nil
}

// RawSession is a session's row as read, its document not decoded yet.
type RawSession struct {
	Doc                  []byte
	LastSeq, AgentOffset int64
	Usage                UsageRow
}

// decodeChunk is the fewest rows a worker of DecodeSessions takes: below
// it one goroutine decodes them all.
const decodeChunk = 64

// DecodeSessions decodes rows in order, on every core when there are
// many: a document takes ~30 µs, and a booting daemon reads a thousand
// live sessions before it can answer.
func DecodeSessions(rows []RawSession) ([]*berth.Session, error) {
	out := make([]*berth.Session, len(rows))
	decode := func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			s, err := DecodeSession(rows[i].Doc, rows[i].LastSeq, rows[i].AgentOffset)
			if err != nil {
				return err
			}
			s.Usage = rows[i].Usage.Usage()
			out[i] = s
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(rows)/decodeChunk)
	if workers <= 1 {
		return out, decode(0, len(rows))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(rows)/workers, (w+1)*len(rows)/workers
		wg.Go(func() { errs[w] = decode(lo, hi) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SessionColumns are the columns ScanSession reads, in its order.
const SessionColumns = `doc, last_seq, agent_offset, ` + UsageColumns + `, ` + StorageColumns

// ScanSession reads one session with scan, whose targets are a row's
// SessionColumns. ENotFound naming id when there is no row.
func ScanSession(scan func(dest ...any) error, id string) (*berth.Session, error) {
	var doc []byte
	var lastSeq, agentOffset int64
	var u UsageRow
	var storageSeq, storageAt int64
	err := scan(append(append([]any{&doc, &lastSeq, &agentOffset}, u.Targets()...), &storageSeq, &storageAt)...)
	if err := OneRow(err, "get session", "session %s not found", id); err != nil {
		return nil, err
	}
	sess, err := DecodeSession(doc, lastSeq, agentOffset)
	if err != nil {
		return nil, err
	}
	sess.Usage = u.Usage()
	sess.Storage = StorageSync(storageSeq, storageAt)
	return sess, nil
}

// Session list bounds: the page size of a limit of 0, and the largest.
const (
	DefaultSessionLimit = 50
	MaxSessionLimit     = 1000
)

// SessionLimit is the page size of a session list asked for limit:
// DefaultSessionLimit for 0, at most MaxSessionLimit. EInvalid for a
// negative limit.
func SessionLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, berth.Errorf(berth.EInvalid, "limit must not be negative")
	case limit == 0:
		return DefaultSessionLimit, nil
	}
	return min(limit, MaxSessionLimit), nil
}

// StateConflict is the EConflict of an update of session id guarded by
// state from, when the stored state is state.
func StateConflict(id string, state, from berth.State) error {
	return &berth.Error{Code: berth.EConflict,
		Message: "session " + id + " is " + string(state) + ", not " + string(from),
		Details: map[string]any{"state": string(state), "expected": string(from)}}
}

// RootOf is the root_id column of s: its RootID, or its own id for a root
// that does not say.
func RootOf(s *berth.Session) string {
	if s.RootID == "" && s.ParentID == "" {
		return s.ID
	}
	return s.RootID
}

// EncodeCursor makes the opaque list position after a row.
func EncodeCursor(createdAt int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(createdAt, 10) + ":" + id))
}

// DecodeCursor is the inverse of EncodeCursor. EInvalid for anything else.
func DecodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", berth.WrapError(berth.EInvalid, err, "malformed cursor")
	}
	at, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return 0, "", berth.Errorf(berth.EInvalid, "malformed cursor")
	}
	return n, id, nil
}

// CheckQueueEntry is what every store refuses of a prompt it is given to
// queue: EInvalid for an entry without an id or a session, or of a kind
// other than queue and steer.
func CheckQueueEntry(e *berth.QueueEntry) error {
	if e == nil || e.ID == "" || e.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "queue entry needs an id and a session id")
	}
	if e.Kind != berth.EntryQueue && e.Kind != berth.EntrySteer {
		return berth.Errorf(berth.EInvalid, "queue entry kind must be %s or %s, not %q", berth.EntryQueue, berth.EntrySteer, e.Kind)
	}
	return nil
}

// EncodeContent is the stored form of a queue entry's content blocks: ""
// for none.
func EncodeContent(blocks []berth.ContentBlock) (string, error) {
	if blocks == nil {
		return "", nil
	}
	b, err := json.Marshal(blocks)
	if err != nil {
		return "", berth.WrapError(berth.EInvalid, err, "queue entry content cannot be encoded")
	}
	return string(b), nil
}

// DecodeContent is the inverse of EncodeContent. EInternal for a stored
// value that does not decode.
func DecodeContent(s string) ([]berth.ContentBlock, error) {
	if s == "" {
		return nil, nil
	}
	var out []berth.ContentBlock
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "decode a queue entry's content")
	}
	return out, nil
}
