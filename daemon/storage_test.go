package daemon

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/objstore"
)

// storageDaemon opens a daemon whose [storage] url is url (the test S3
// server's key in AWS_*), running the demo agent (this test binary) as
// its own children on the host sandbox.
func storageDaemon(t *testing.T, s3 testenv.S3, url string) *Daemon {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	home, err := os.MkdirTemp("", "berth-storage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cfg := config.Default()
	cfg.Sandbox.Default = berth.SandboxHost
	cfg.Storage.URL = url
	cfg.Agents = []berth.AgentSpec{{Name: "demo", Command: self, Env: map[string]string{agentEnvVar: "demo"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), Options{Home: home, Config: cfg, Socket: filepath.Join(home, "berth.sock"), NoShims: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		d.Close(ctx)
	})
	return d
}

// turn prompts session id with text and waits for its end; it returns
// how long that took.
func turn(t *testing.T, d *Daemon, id, text string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	r, err := d.Manager().Prompt(ctx, id, berth.PromptRequest{Text: text})
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	res, err := d.Manager().WaitTurn(ctx, id, r.TurnID)
	if err != nil || res.StopReason != berth.TurnEndTurn {
		t.Fatalf("turn %q: %+v, %v", text, res, err)
	}
	return time.Since(start)
}

// lastTurnEnded is the seq of the session's last turn_ended.
func lastTurnEnded(t *testing.T, d *Daemon, id string) int64 {
	t.Helper()
	ctx := testenv.Context(t)
	if err := d.log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := d.store.ListEvents(ctx, id, berth.EventFilter{Type: berth.EventTurnEnded, Limit: berth.MaxEventLimit})
	if err != nil || len(evs) == 0 {
		t.Fatalf("turn_ended events: %v, %v", evs, err)
	}
	return evs[len(evs)-1].Seq
}

// waitSynced waits until the session's storage.synced_seq is seq.
func waitSynced(t *testing.T, d *Daemon, id string, seq int64) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, "storage.synced_seq to reach the last turn's", func() bool {
		s, err := d.Manager().GetSession(testenv.Context(t), id)
		return err == nil && s.Storage != nil && s.Storage.SyncedSeq == seq
	})
}

// tree describes the regular files, directories and links under dir.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With [storage] url set, each turn's end writes the session's managed
// workspace and HOME (where the demo agent keeps its conversation) to
// the object store: synced_seq reaches the last turn's turn_ended, and
// Restore into fresh directories gives both exactly as that turn left
// them.
func TestStorageSyncsEachTurn(t *testing.T) {
	s3 := testenv.S3Server(t)
	d := storageDaemon(t, s3, s3.URL)
	ctx := testenv.Context(t)
	s, err := d.Manager().CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Manager().GetSession(ctx, s.ID); got.Storage != nil {
		t.Fatalf("a new session shows storage %+v", got.Storage)
	}
	turn(t, d, s.ID, "write a.txt one")
	turn(t, d, s.ID, "write sub/b.txt two\nwrite a.txt changed")
	waitSynced(t, d, s.ID, lastTurnEnded(t, d, s.ID))
	// The API shows it: GET /v1/sessions/{id}'s storage.
	api, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	got, err := api.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Storage == nil || got.Storage.SyncedSeq != lastTurnEnded(t, d, s.ID) || got.Storage.SyncedAt.IsZero() {
		t.Errorf("GET /v1/sessions/{id}: storage %+v", got.Storage)
	}

	c, err := objstore.Open(objstore.Config{URL: s3.URL, Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	ws, home := t.TempDir(), t.TempDir()
	st, err := objstore.Restore(ctx, c, s.ID, ws, home, objstore.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != lastTurnEnded(t, d, s.ID) {
		t.Errorf("restored state of seq %d", st.Seq)
	}
	gotWS, want := tree(t, ws), tree(t, s.Workspace)
	if len(want) != 3 || !strings.HasSuffix(gotWS["a.txt"], " changed") || !equalTrees(gotWS, want) {
		t.Errorf("workspace restored:\n%v\nwant\n%v", gotWS, want)
	}
	gotHome, wantHome := tree(t, home), tree(t, d.Manager().HomeDir(s.ID))
	conversation := false
	for p := range wantHome {
		conversation = conversation || strings.HasPrefix(p, ".berth-demo/")
	}
	if !conversation || !equalTrees(gotHome, wantHome) {
		t.Errorf("HOME restored:\n%v\nwant (with the demo agent's conversation)\n%v", gotHome, wantHome)
	}
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// With the object store unreachable, turns take no longer than with it
// up, the session gets one runtime_warning however many writes fail,
// and synced_seq catches up with the last turn once the store is back.
func TestStorageDownNeverSlowsATurn(t *testing.T) {
	s3 := testenv.S3Server(t)
	loc, err := objstore.ParseURL(s3.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewSwitchProxy(t, loc.Endpoint)
	d := storageDaemon(t, s3, strings.Replace(s3.URL, loc.Endpoint, proxy.Addr(), 1))
	ctx := testenv.Context(t)
	s, err := d.Manager().CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	up := turn(t, d, s.ID, "write a.txt one")
	waitSynced(t, d, s.ID, lastTurnEnded(t, d, s.ID))

	proxy.SetDown(true)
	var down time.Duration
	for i := range 3 {
		down = max(down, turn(t, d, s.ID, "write a.txt again "+string(rune('a'+i))))
	}
	// A turn is milliseconds; a write waiting on the store would be seconds.
	if down > up+2*time.Second {
		t.Errorf("a turn with the store down took %s, with it up %s", down, up)
	}
	warnings := func() int {
		if err := d.log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := d.store.ListEvents(ctx, s.ID, berth.EventFilter{Type: berth.EventRuntimeWarning, Limit: berth.MaxEventLimit})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if strings.Contains(string(ev.Data), "object store") {
				n++
			}
		}
		return n
	}
	testenv.WaitFor(t, 30*time.Second, "a runtime_warning about the object store", func() bool { return warnings() > 0 })
	// Failed writes are retried (1 s, then 2 s): a few more fail meanwhile.
	// /v1/health says how far behind the store is, and why.
	testenv.WaitFor(t, 30*time.Second, "retries", func() bool {
		h, err := d.Manager().Health(ctx)
		return err == nil && h.Storage != nil && h.Storage.Error != "" && h.Storage.LagSeconds > 3
	})
	proxy.SetDown(false)
	waitSynced(t, d, s.ID, lastTurnEnded(t, d, s.ID))
	if n := warnings(); n != 1 {
		t.Errorf("%d runtime_warnings about the object store for one outage, want 1", n)
	}
	// The write goes on past the state (the checkpoints): then no lag.
	testenv.WaitFor(t, 30*time.Second, "health to say the store has every session", func() bool {
		h, err := d.Manager().Health(ctx)
		return err == nil && h.Storage != nil && *h.Storage == (berth.StorageHealth{})
	})
}

// A [storage] url the object store cannot be used with, or one without
// credentials, stops the daemon at start with EInvalid naming the key;
// nothing is left open (the home can be opened again).
func TestStorageBadConfigRefused(t *testing.T) {
	home := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	for url, want := range map[string]string{
		"s3://bucket/p": "storage.url",
		"s3://Bad_Bucket/p?endpoint=http://127.0.0.1:1": "storage.url",
		"s3://bucket/p?endpoint=http://127.0.0.1:1":     "no credentials",
	} {
		cfg := config.Default()
		cfg.Storage.URL = url
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v (the shape is config's; the rest is the daemon's)", url, err)
		}
		_, err := Open(context.Background(), Options{Home: home, Config: cfg, Socket: filepath.Join(home, "berth.sock")})
		if berth.ErrorCode(err) != berth.EInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want invalid naming %q", url, err, want)
		}
	}
}

// DELETE /v1/sessions/{id} takes the session's own objects out of the
// object store too (its state.json and checkpoints: its HOME's
// conversation with them): a user who deletes a session finds nothing of
// it left under sessions/<id>/.
func TestDeletedSessionLeavesTheObjectStore(t *testing.T) {
	s3 := testenv.S3Server(t)
	d := storageDaemon(t, s3, s3.URL)
	ctx := testenv.Context(t)
	s, err := d.Manager().CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	turn(t, d, s.ID, "write a.txt one")
	waitSynced(t, d, s.ID, lastTurnEnded(t, d, s.ID))
	c, err := objstore.Open(objstore.Config{URL: s3.URL, Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		if err := c.List(ctx, objstore.SessionKey(s.ID), func(string, int64) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() == 0 {
		t.Fatal("the session is not in the store")
	}
	api, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if err := api.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the session's objects gone", func() bool { return count() == 0 })
}
