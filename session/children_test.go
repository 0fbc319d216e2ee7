package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/host"
)

// spawn spawns a child of parent and fails the test on an error.
func (e *env) spawn(parent string, req berth.CreateRequest) *berth.Session {
	e.t.Helper()
	if req.Agent == "" {
		req.Agent = "demo"
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = 600
	}
	s, err := e.m.SpawnChild(context.Background(), parent, req, "")
	if err != nil {
		e.t.Fatalf("spawn under %s: %v", parent, err)
	}
	return s
}

// errLimit returns the code and the details' "limit" or "field" of err.
func errWhat(err error) (string, any) {
	var be *berth.Error
	if !errors.As(err, &be) {
		return "", nil
	}
	if v, ok := be.Details["limit"]; ok {
		return be.Code, v
	}
	return be.Code, be.Details["field"]
}

// childEvents returns the data of a log's events of one type.
func childEvents(t *testing.T, evs []berth.Event, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range ofType(evs, typ) {
		var d map[string]any
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// A child records its place in the tree, works in its parent's workspace,
// and is announced in its parent's log; a tree grows no deeper than
// limits.max_depth (409 naming it), and ?root= lists the whole tree.
func TestSpawnChildLineage(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxDepth = 2 })
	root := e.create(berth.CreateRequest{Name: "root"})
	if root.RootID != root.ID || root.Depth != 0 || root.ParentID != "" {
		t.Fatalf("root lineage: parent %q root %q depth %d", root.ParentID, root.RootID, root.Depth)
	}
	kid := e.spawn(root.ID, berth.CreateRequest{Name: "kid"})
	if kid.State != berth.StateActive || kid.ParentID != root.ID || kid.RootID != root.ID || kid.Depth != 1 {
		t.Fatalf("child: state %s parent %q root %q depth %d", kid.State, kid.ParentID, kid.RootID, kid.Depth)
	}
	if kid.Workspace != root.Workspace || kid.ManagedWorkspace {
		t.Fatalf("child workspace %q (managed %v), parent's %q", kid.Workspace, kid.ManagedWorkspace, root.Workspace)
	}
	if kid.ExpiresAt == nil || kid.TTLSeconds != 600 {
		t.Fatalf("child ttl %d expires %v", kid.TTLSeconds, kid.ExpiresAt)
	}
	grand := e.spawn(kid.ID, berth.CreateRequest{Name: "grand"})
	if grand.RootID != root.ID || grand.Depth != 2 || grand.ParentID != kid.ID {
		t.Fatalf("grandchild: parent %q root %q depth %d", grand.ParentID, grand.RootID, grand.Depth)
	}
	_, err := e.m.SpawnChild(context.Background(), grand.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, "")
	if code, what := errWhat(err); code != berth.EConflict || what != "max_depth" {
		t.Fatalf("spawn at depth 3: %v (%s %v), want conflict naming max_depth", err, code, what)
	}
	started := childEvents(t, e.events(root.ID), berth.EventChildStarted)
	if len(started) != 1 || started[0]["child_id"] != kid.ID || started[0]["agent"] != "demo" || started[0]["name"] != "kid" {
		t.Fatalf("parent's child_started: %v", started)
	}
	page, err := e.m.ListSessions(context.Background(), berth.SessionFilter{Root: root.ID})
	if err != nil || len(page.Sessions) != 3 {
		t.Fatalf("?root= lists %d sessions, %v", len(page.Sessions), err)
	}
	page, err = e.m.ListSessions(context.Background(), berth.SessionFilter{Parent: root.ID})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != kid.ID {
		t.Fatalf("?parent= lists %v, %v", page.Sessions, err)
	}
}

// The default limits.max_depth is 1: a child cannot spawn.
func TestSpawnChildDefaultDepth(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{})
	_, err := e.m.SpawnChild(context.Background(), kid.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, "")
	if code, what := errWhat(err); code != berth.EConflict || what != "max_depth" {
		t.Fatalf("grandchild under the default depth: %v", err)
	}
}

// ttl_seconds is required, range-checked like create's; the parent must
// exist and be active.
func TestSpawnChildRequests(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	ctx := context.Background()
	for _, ttl := range []int{0, -1, berth.MaxSessionSeconds + 1} {
		_, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: ttl}, "")
		if code, what := errWhat(err); code != berth.EInvalid || what != "ttl_seconds" {
			t.Errorf("ttl %d: %v, want invalid naming ttl_seconds", ttl, err)
		}
	}
	for _, key := range []string{strings.Repeat("k", 256), "two words", "tab\there", "ünï"} {
		if _, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, key); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Idempotency-Key %q: %v, want invalid", key, err)
		}
	}
	if _, err := e.m.SpawnChild(ctx, "ses_nope", berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, ""); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("unknown parent: %v", err)
	}
	if _, err := e.m.StopSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, ""); !berth.IsCode(err, berth.EConflict) {
		t.Errorf("stopped parent: %v", err)
	}
	if kids, _ := e.m.ListSessions(ctx, berth.SessionFilter{Parent: root.ID}); len(kids.Sessions) != 0 {
		t.Errorf("a refused spawn stored %d children", len(kids.Sessions))
	}
}

// limits.max_children counts the live children of one parent: one more is
// 409 naming the limit, even when many ask at once; a stopped child frees
// its place.
func TestSpawnChildMaxChildren(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxChildren = 2 })
	root := e.create(berth.CreateRequest{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []*berth.Session
	var refused int
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.m.SpawnChild(context.Background(), root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, "")
			mu.Lock()
			defer mu.Unlock()
			if code, what := errWhat(err); err != nil && (code != berth.EConflict || what != "max_children") {
				t.Errorf("spawn: %v, want conflict naming max_children", err)
			}
			if err == nil {
				made = append(made, s)
			} else {
				refused++
			}
		}()
	}
	wg.Wait()
	if len(made) != 2 || refused != 3 {
		t.Fatalf("5 spawns at once under max_children 2: %d made, %d refused", len(made), refused)
	}
	if _, err := e.m.StopSession(context.Background(), made[0].ID); err != nil {
		t.Fatal(err)
	}
	e.spawn(root.ID, berth.CreateRequest{})
}

// A child can never be given more than its parent has: a looser
// permission mode, network, env the parent was not given, a workspace
// outside the parent's or a snapshot are 403 naming what, and nothing is
// stored; what it omits it inherits.
// A child may run another agent only when the catalog gives that agent
// nothing the parent's agent is not given (its pass_env variables, its
// home_files, its env): else a session could read another agent's API
// keys through a child it spawned.
func TestSpawnChildCannotTakeAnotherAgentsCredentials(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	ctx := context.Background()
	_, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo-creds", TTLSeconds: 60}, "")
	if code, what := errWhat(err); code != berth.EForbidden || what != "agent" {
		t.Errorf("a child of an agent with credentials: %v (%s %v), want permission_denied naming agent", err, code, what)
	}
	// An agent given nothing more is allowed; so is the parent's own.
	for _, agent := range []string{"demo-noload", "", "demo"} {
		kid, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: agent, TTLSeconds: 60}, "")
		if err != nil {
			t.Fatalf("child of agent %q: %v", agent, err)
		}
		if want := map[string]string{"": "demo"}[agent]; kid.Agent != agent && kid.Agent != want {
			t.Errorf("child of agent %q runs %q", agent, kid.Agent)
		}
		if _, err := e.m.StopSession(ctx, kid.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The other way round: a parent with credentials may spawn the demo.
	rich := e.create(berth.CreateRequest{Agent: "demo-creds"})
	if _, err := e.m.SpawnChild(ctx, rich.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, ""); err != nil {
		t.Errorf("a child with fewer credentials than its parent: %v", err)
	}
}

func TestSpawnChildNarrowing(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	root := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk, Env: map[string]string{"A": "1", "B": "2"}})
	if root.Sandbox.Network {
		t.Fatal("the parent has network: the test needs one without")
	}
	// Another session's managed workspace: its files are not the parent's.
	neighbour := e.create(berth.CreateRequest{})
	ctx := context.Background()
	for _, c := range []struct {
		req   berth.CreateRequest
		field string
	}{
		{berth.CreateRequest{PermissionMode: berth.PermApproveAll}, "permission_mode"},
		{berth.CreateRequest{PermissionMode: berth.PermApproveReads}, "permission_mode"},
		{berth.CreateRequest{Network: berth.NetworkOf(true)}, "network"},
		{berth.CreateRequest{Env: map[string]string{"A": "x", "SECRET": "y"}}, "env"},
		{berth.CreateRequest{Workspace: outside}, "workspace"},
		{berth.CreateRequest{Workspace: neighbour.Workspace}, "workspace"},
		{berth.CreateRequest{FromSnapshot: "snap_x"}, "from_snapshot"},
	} {
		c.req.Agent, c.req.TTLSeconds = "demo", 60
		_, err := e.m.SpawnChild(ctx, root.ID, c.req, "")
		if code, what := errWhat(err); code != berth.EForbidden || what != c.field {
			t.Errorf("%+v: %v (%s %v), want permission_denied naming %s", c.req, err, code, what, c.field)
		}
	}
	if kids, _ := e.m.ListSessions(ctx, berth.SessionFilter{Parent: root.ID}); len(kids.Sessions) != 0 {
		t.Fatalf("refused spawns stored %d children", len(kids.Sessions))
	}
	// As strict or stricter is fine; the rest is inherited.
	kid := e.spawn(root.ID, berth.CreateRequest{Env: map[string]string{"B": "3"}})
	if kid.PermissionMode != berth.PermAsk || kid.Sandbox != root.Sandbox {
		t.Fatalf("child mode %s sandbox %+v, parent's %s %+v", kid.PermissionMode, kid.Sandbox, root.PermissionMode, root.Sandbox)
	}
	stored, err := e.store.GetSession(ctx, kid.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(stored.Env) != "map[A:1 B:3]" {
		t.Fatalf("child env %v, want the parent's with B overridden", stored.Env)
	}
	strict := e.spawn(root.ID, berth.CreateRequest{PermissionMode: berth.PermDenyAll})
	if strict.PermissionMode != berth.PermDenyAll {
		t.Fatalf("stricter mode became %s", strict.PermissionMode)
	}
}

// An agent that gets the network by default (its catalog entry needs it)
// does not get it under a parent that has none: the child runs without,
// and is told why.
func TestSpawnChildNoDefaultNetwork(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		c := catalog()
		spec := c["demo"]
		spec.Name, spec.Network = "netdemo", true
		c["netdemo"] = spec
		o.Catalog = c
	})
	root := e.create(berth.CreateRequest{Agent: "demo"})
	if root.Sandbox.Network {
		t.Fatal("parent got network")
	}
	if own := e.create(berth.CreateRequest{Agent: "netdemo"}); !own.Sandbox.Network {
		t.Fatal("netdemo as a root gets no network: the test proves nothing")
	}
	kid := e.spawn(root.ID, berth.CreateRequest{Agent: "netdemo"})
	if kid.Sandbox.Network {
		t.Fatal("a child got the network its parent does not have")
	}
	warned := false
	for _, d := range childEvents(t, e.events(kid.ID), berth.EventRuntimeWarning) {
		r, _ := d["reason"].(string)
		warned = warned || strings.Contains(r, "parent session has none")
	}
	if !warned {
		t.Fatal("the child was not told why it has no network")
	}
}

// The sandbox narrows too: under a sandboxed parent, host (asked, or
// inherited from the daemon's default) is refused.
func TestSpawnNarrowSandbox(t *testing.T) {
	k := &spawn{m: New(Options{Providers: slices.Collect(maps.Values(capsProviders()))}), parent: &berth.Session{ID: "ses_p", Agent: "demo", PermissionMode: berth.PermApproveReads, Workspace: "/w",
		Sandbox: berth.SandboxSpec{Provider: berth.SandboxBwrap}}}
	for _, c := range []struct {
		sandbox string
		ok      bool
	}{{berth.SandboxHost, false}, {berth.SandboxBwrap, true}, {berth.SandboxDocker, true}, {"", true}} {
		req := berth.CreateRequest{Agent: "demo", Sandbox: c.sandbox}
		err := k.narrowRequest(&req)
		if code, what := errWhat(err); c.ok != (err == nil) || (!c.ok && (code != berth.EForbidden || what != "sandbox")) {
			t.Errorf("sandbox %q under bwrap: %v", c.sandbox, err)
		}
		if c.sandbox == "" && req.Sandbox != berth.SandboxBwrap {
			t.Errorf("an omitted sandbox became %q, not the parent's", req.Sandbox)
		}
	}
	// "auto" that resolves to host is caught once resolved.
	b := &birth{req: berth.CreateRequest{Workspace: "/w"}, provider: capsProviders()[berth.SandboxHost]}
	if code, what := errWhat(k.narrow(b)); code != berth.EForbidden || what != "sandbox" {
		t.Errorf("auto resolved to host under bwrap: %s %v", code, what)
	}
}

// Stopping a parent stops its whole tree with parent_stopped, each
// child_stopped (with the child's last message) logged in its parent's
// log before that parent's session_stopped.
func TestStopParentStopsTree(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxDepth = 2 })
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{Name: "kid"})
	grand := e.spawn(kid.ID, berth.CreateRequest{})
	if r := e.prompt(kid.ID, "echo hello from the kid"); r.Text != "hello from the kid" {
		t.Fatalf("kid said %q", r.Text)
	}
	got, err := e.m.StopSession(context.Background(), root.ID)
	if err != nil || got.State != berth.StateStopped || got.StopReason != berth.StopUserRequested {
		t.Fatalf("stop root: %+v %v", got, err)
	}
	for _, id := range []string{kid.ID, grand.ID} {
		s, err := e.m.GetSession(context.Background(), id)
		if err != nil || s.State != berth.StateStopped || s.StopReason != berth.StopParentStopped {
			t.Fatalf("descendant %s after the root stopped: %+v %v", id, s, err)
		}
	}
	for _, c := range []struct{ parent, child, text string }{{root.ID, kid.ID, "hello from the kid"}, {kid.ID, grand.ID, ""}} {
		evs := e.events(c.parent)
		checkContiguous(t, evs)
		if last := evs[len(evs)-1]; last.Type != berth.EventSessionStopped {
			t.Fatalf("%s's log ends with %s, not session_stopped: %v", c.parent, last.Type, types(evs))
		}
		stopped := childEvents(t, evs, berth.EventChildStopped)
		if len(stopped) != 1 || stopped[0]["child_id"] != c.child || stopped[0]["stop_reason"] != string(berth.StopParentStopped) ||
			stopped[0]["text"] != c.text {
			t.Fatalf("%s's child_stopped: %v", c.parent, stopped)
		}
	}
}

// A parent whose agent dies takes its children along too.
func TestParentCrashStopsChildren(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{})
	ctx := context.Background()
	if _, err := e.m.Prompt(ctx, root.ID, berth.PromptRequest{Text: "crash 3"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to stop", func() bool {
		s, err := e.m.GetSession(ctx, kid.ID)
		return err == nil && s.State == berth.StateStopped
	})
	s, _ := e.m.GetSession(ctx, kid.ID)
	if s.StopReason != berth.StopParentStopped {
		t.Fatalf("child of a crashed parent stopped %s", s.StopReason)
	}
	// The parent's monitor stopped it, before the parent's session_stopped.
	waitFor(t, "the parent to stop", func() bool {
		s, err := e.m.GetSession(ctx, root.ID)
		return err == nil && s.State == berth.StateStopped
	})
	evs := e.events(root.ID)
	if n := len(evs); n < 2 || evs[n-1].Type != berth.EventSessionStopped || evs[n-2].Type != berth.EventChildStopped {
		t.Fatalf("the crashed parent's log ends %v", types(evs))
	}
}

// A child whose TTL runs out stops with ttl_expired, its parent goes on
// and logs child_stopped.
func TestChildTTLExpires(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.SuperviseEvery = 20 * time.Millisecond })
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{TTLSeconds: 1})
	ctx := context.Background()
	waitFor(t, "the child to expire", func() bool {
		s, err := e.m.GetSession(ctx, kid.ID)
		return err == nil && s.State == berth.StateStopped
	})
	if s, _ := e.m.GetSession(ctx, kid.ID); s.StopReason != berth.StopTTLExpired {
		t.Fatalf("child stopped %s, want ttl_expired", s.StopReason)
	}
	if s, _ := e.m.GetSession(ctx, root.ID); s.State != berth.StateActive {
		t.Fatalf("the parent is %s after its child expired", s.State)
	}
	waitFor(t, "child_stopped in the parent's log", func() bool {
		d := childEvents(t, e.events(root.ID), berth.EventChildStopped)
		return len(d) == 1 && d[0]["stop_reason"] == string(berth.StopTTLExpired)
	})
}

// A child whose parent is stopped cannot be resumed (409); once the parent
// is resumed, it can.
func TestResumeChildNeedsLiveParent(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{})
	ctx := context.Background()
	if _, err := e.m.StopSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, kid.ID); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("resume of a child under a stopped parent: %v, want conflict", err)
	}
	if s, _ := e.m.GetSession(ctx, kid.ID); s.State != berth.StateStopped {
		t.Fatalf("the refused child is %s", s.State)
	}
	if _, err := e.m.ResumeSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	if s, err := e.m.ResumeSession(ctx, kid.ID); err != nil || s.State != berth.StateActive {
		t.Fatalf("resume under a live parent: %+v %v", s, err)
	}
}

// Deleting a parent stops and deletes its whole tree.
func TestDeleteParentDeletesTree(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxDepth = 2 })
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{})
	grand := e.spawn(kid.ID, berth.CreateRequest{})
	other := e.create(berth.CreateRequest{})
	ctx := context.Background()
	if err := e.m.DeleteSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{root.ID, kid.ID, grand.ID} {
		if _, err := e.m.GetSession(ctx, id); !berth.IsCode(err, berth.ENotFound) {
			t.Errorf("%s after its root was deleted: %v", id, err)
		}
	}
	if s, err := e.m.GetSession(ctx, other.ID); err != nil || s.State != berth.StateActive {
		t.Fatalf("an unrelated session: %+v %v", s, err)
	}
	if len(e.m.LiveIDs()) != 1 {
		t.Fatalf("live after the delete: %v", e.m.LiveIDs())
	}
}

// An Idempotency-Key makes a retry answer the same child, even when many
// retries race and after a restart; the same key with another body is a
// conflict; another parent's key is its own.
func TestSpawnIdempotencyKey(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxChildren = 10 })
	root := e.create(berth.CreateRequest{})
	ctx := context.Background()
	req := berth.CreateRequest{Agent: "demo", Name: "once", TTLSeconds: 60}
	ids := make([]string, 6)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.m.SpawnChild(ctx, root.ID, req, "key-1")
			if err != nil {
				t.Errorf("spawn %d: %v", i, err)
				return
			}
			ids[i] = s.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("retries answered different children: %v", ids)
		}
	}
	if kids, _ := e.m.ListSessions(ctx, berth.SessionFilter{Parent: root.ID}); len(kids.Sessions) != 1 {
		t.Fatalf("%d children for one key", len(kids.Sessions))
	}
	other := req
	other.Name = "another"
	if _, err := e.m.SpawnChild(ctx, root.ID, other, "key-1"); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("same key, another body: %v, want conflict", err)
	}
	if s, err := e.m.SpawnChild(ctx, root.ID, req, "key-2"); err != nil || s.ID == ids[0] {
		t.Fatalf("another key: %v %v", s, err)
	}
	// Kept in the store: a restart does not forget it.
	// The parent is stopped by then: the retry still finds its child.
	e.close()
	e.open()
	if s, err := e.m.SpawnChild(ctx, root.ID, req, "key-1"); err != nil || s.ID != ids[0] {
		t.Fatalf("retry after a restart: %v %v, want %s", s, err, ids[0])
	}
}

// A child whose agent never starts is answered stopped/startup_failed, like
// a create, and its parent's log says so.
func TestSpawnChildStartupFailed(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{})
	for _, agent := range []string{"missing", "exits"} {
		kid, err := e.m.SpawnChild(context.Background(), root.ID, berth.CreateRequest{Agent: agent, TTLSeconds: 60}, "")
		if err != nil || kid.State != berth.StateStopped || kid.StopReason != berth.StopStartupFailed {
			t.Fatalf("%s child: %+v %v", agent, kid, err)
		}
		waitFor(t, "child_stopped of "+agent, func() bool {
			for _, d := range childEvents(t, e.events(root.ID), berth.EventChildStopped) {
				if d["child_id"] == kid.ID && d["stop_reason"] == string(berth.StopStartupFailed) {
					return true
				}
			}
			return false
		})
	}
}

// InSubtree says whether a session is in another's subtree, the check the
// berth MCP server makes: a session's own tree below it, never a sibling's,
// an ancestor's or another tree's.
func TestInSubtree(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxDepth = 2 })
	root := e.create(berth.CreateRequest{})
	a := e.spawn(root.ID, berth.CreateRequest{})
	b := e.spawn(root.ID, berth.CreateRequest{})
	a1 := e.spawn(a.ID, berth.CreateRequest{})
	other := e.create(berth.CreateRequest{})
	ctx := context.Background()
	for _, c := range []struct {
		ancestor, id string
		want         bool
	}{
		{root.ID, root.ID, true}, {root.ID, a.ID, true}, {root.ID, a1.ID, true}, {a.ID, a1.ID, true},
		{a.ID, b.ID, false}, {a.ID, root.ID, false}, {a1.ID, a.ID, false}, {b.ID, a1.ID, false},
		{other.ID, a.ID, false}, {root.ID, other.ID, false},
	} {
		got, err := e.m.InSubtree(ctx, c.ancestor, c.id)
		if err != nil || got != c.want {
			t.Errorf("InSubtree(%s, %s) = %v, %v; want %v", c.ancestor, c.id, got, err, c.want)
		}
	}
	if _, err := e.m.InSubtree(ctx, root.ID, "ses_nope"); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("unknown session: %v", err)
	}
}

// Spawns racing their parent's stop never leave a child running: each is
// refused, or admitted before the parent closed and stopped with it; so
// too when the parent's agent dies (its state is active until the monitor
// records it stopped).
func TestSpawnsRacingTheParentsStop(t *testing.T) {
	for _, how := range []string{"stop", "crash"} {
		t.Run(how, func(t *testing.T) { spawnsRacingTheParent(t, how) })
	}
}

func spawnsRacingTheParent(t *testing.T, how string) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxChildren = 100; o.Limits.SuperviseEvery = time.Hour })
	root := e.create(berth.CreateRequest{})
	ctx := context.Background()
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	var mu sync.Mutex
	made := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopped:
					return
				default:
				}
				s, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60}, "")
				if err != nil {
					if !berth.IsCode(err, berth.EConflict) {
						t.Errorf("spawn: %v", err)
					}
					return
				}
				if s.ParentID != root.ID {
					t.Errorf("spawned %+v", s)
				}
				mu.Lock()
				made++
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "a few children", func() bool { mu.Lock(); defer mu.Unlock(); return made >= 3 })
	if how == "stop" {
		if _, err := e.m.StopSession(ctx, root.ID); err != nil {
			t.Fatal(err)
		}
	} else {
		if _, err := e.m.Prompt(ctx, root.ID, berth.PromptRequest{Text: "crash 3"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the parent to stop", func() bool { return e.m.set.liveOf(root.ID) == nil })
	}
	close(stopped)
	wg.Wait()
	// Whatever was admitted stopped with its parent, before its stop
	// answered.
	if n := len(e.m.trees.liveChildrenOf(root.ID)); n != 0 {
		t.Fatalf("%d children still live after their parent's stop", n)
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{Parent: root.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Sessions {
		if s.State != berth.StateStopped || s.StopReason != berth.StopParentStopped {
			t.Errorf("child %s after its parent stopped: %s/%s", s.ID, s.State, s.StopReason)
		}
	}
}

// A session's name is bounded and plain text, whoever names it (an agent
// names the children it spawns through its tools, past any client schema).
func TestSessionNameIsBounded(t *testing.T) {
	e := newEnv(t)
	root := e.create(berth.CreateRequest{Name: "fine name ✓"})
	ctx := context.Background()
	for _, name := range []string{strings.Repeat("n", berth.MaxNameBytes+1), "evil\x1b]0;title\x07", "bad\xffutf8"} {
		if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Name: name}); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("create named %q: %v, want invalid_argument", name, err)
		}
		if _, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Name: name, TTLSeconds: 60}, ""); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("spawn named %q: %v, want invalid_argument", name, err)
		}
	}
}

// capsProvider is a provider that says what it can do, and makes nothing.
type capsProvider struct {
	name string
	caps berth.SandboxCapabilities
}

func (p capsProvider) Name() string                            { return p.name }
func (p capsProvider) Capabilities() berth.SandboxCapabilities { return p.caps }
func (capsProvider) Probe(context.Context) error               { return nil }
func (capsProvider) Open(context.Context, berth.SandboxConfig) (berth.Sandbox, error) {
	return nil, berth.Errorf(berth.EUnavailable, "a test provider makes no sandbox")
}

// capsProviders are the three providers as their capabilities say, for
// tests of what a session may ask of them.
func capsProviders() map[string]berth.SandboxProvider {
	return map[string]berth.SandboxProvider{
		berth.SandboxHost:   capsProvider{berth.SandboxHost, host.New().Capabilities()},
		berth.SandboxBwrap:  capsProvider{berth.SandboxBwrap, bwrap.New(bwrap.Options{}).Capabilities()},
		berth.SandboxDocker: capsProvider{berth.SandboxDocker, berth.SandboxCapabilities{Isolation: 1, Binds: true, Limits: true}},
	}
}
