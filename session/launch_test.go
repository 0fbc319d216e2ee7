package session

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// sessionProcs are the pids of this host's processes that carry session
// id in their environment (an agent, and what it started).
func sessionProcs(id string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, []byte("BERTH_SESSION_ID="+id+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// failingCreateStore refuses to store a new session, once the session's
// agent runs (or a bound passes): the create must have started it
// meanwhile.
type failingCreateStore struct {
	berth.Store
	id         string
	agentSeen  bool
	agentBound time.Duration
}

func (s *failingCreateStore) CreateSession(ctx context.Context, sess *berth.Session) error {
	s.id = sess.ID
	deadline := time.Now().Add(s.agentBound)
	for !s.agentSeen && time.Now().Before(deadline) {
		s.agentSeen = len(sessionProcs(sess.ID)) > 0
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("disk full")
}

// With shims the agent starts while the session is stored; when the store
// refuses the session, the create fails and leaves nothing: no agent, no
// shim, none of its files in the run directory, no session.
func TestCreateWhoseStoreFailsLeavesNoAgent(t *testing.T) {
	fail := &failingCreateStore{agentBound: 10 * time.Second}
	e := &env{t: t, home: t.TempDir(), wrap: func(st berth.Store) berth.Store { fail.Store = st; return fail }}
	e.open(withShims(e.home), withTools)
	t.Cleanup(e.close)

	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Sandbox: berth.SandboxHost})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("CreateSession = %v, want the store's error", err)
	}
	if !fail.agentSeen {
		t.Fatal("the agent did not start while the session was stored")
	}
	waitFor(t, "the agent of the session not stored to end", func() bool { return len(sessionProcs(fail.id)) == 0 })
	// The shim's files, and the berth tools' directory.
	left, _ := filepath.Glob(filepath.Join(e.home, "run", "*"+fail.id+"*"))
	if len(left) > 0 {
		t.Errorf("files of the session not stored are left in the run directory: %v", left)
	}
	if _, err := e.store.GetSession(context.Background(), fail.id); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("GetSession of the session not stored = %v, want not_found", err)
	}
	if live := e.m.LiveIDs(); len(live) != 0 {
		t.Errorf("live sessions after a failed create: %v", live)
	}
}

// A create that fails while it writes the workspace leaves nothing of the
// session: not its directories, nor the berth tools' directory made
// beside them.
func TestCreateWhoseFilesFailLeavesNoDirectories(t *testing.T) {
	e := newEnv(t, withTools, withShims(t.TempDir()))
	// "a" is written as a file, then "a/b" cannot be.
	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Sandbox: berth.SandboxHost,
		Files: map[string]string{"a": "x", "a/b": "y"}})
	if err == nil {
		t.Fatal("CreateSession with files that cannot be written succeeded")
	}
	for _, dir := range []string{e.m.opts.RunDir, filepath.Join(e.home, "sessions"), filepath.Join(e.home, "workspaces")} {
		ents, _ := os.ReadDir(dir)
		for _, ent := range ents {
			if strings.HasPrefix(ent.Name(), "ses_") || strings.HasPrefix(ent.Name(), "mcp-") {
				t.Errorf("%s is left after a failed create", filepath.Join(dir, ent.Name()))
			}
		}
	}
}
