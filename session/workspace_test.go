package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/bwrap"
)

// wantWorkspaceRefused checks err is invalid_argument on the workspace field.
func wantWorkspaceRefused(t *testing.T, ws string, err error) {
	t.Helper()
	var be *berth.Error
	if !berth.IsCode(err, berth.EInvalid) || !errors.As(err, &be) || be.Details["field"] != "workspace" {
		t.Errorf("workspace %s: %v, want invalid_argument on the workspace field", ws, err)
	}
}

// A workspace given through a symbolic link the daemon's user owns (a
// user's own symlinked project directory) is accepted and stored as the
// real path: the sandbox opens that without following links ever after.
func TestWorkspaceIsStoredResolved(t *testing.T) {
	e := newEnv(t)
	base := t.TempDir()
	real := filepath.Join(base, "project")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink("project", link); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: filepath.Join(link, ".")})
	if s.Workspace != real {
		t.Errorf("workspace stored as %s, want %s", s.Workspace, real)
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Workspace != real {
		t.Errorf("workspace read back as %s, want %s", got.Workspace, real)
	}
}

// F1 at create: session A's agent owns A's workspace (the chown walk gave
// it to the host uid) and plants a link there to a directory of the host;
// session B asked to work in that "subdirectory" is refused, and the
// directory the link points to keeps its owner.
func TestWorkspaceThroughASandboxPlantedLinkIsRefused(t *testing.T) {
	testenv.NeedRoot(t, "needs root: a directory owned by another uid")
	e := newEnv(t)
	wsA, victim := t.TempDir(), t.TempDir()
	if err := os.Chown(wsA, 99999, 99999); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(wsA, "sub")
	if err := os.Symlink(victim, sub); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{sub, filepath.Join(sub, ".")} {
		_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Workspace: ws})
		wantWorkspaceRefused(t, ws, err)
	}
	// A link in a world-writable directory that is not sticky: anyone's.
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(open, "l")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Workspace: link})
	wantWorkspaceRefused(t, link, err)
	var st syscall.Stat_t
	if err := syscall.Stat(victim, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Errorf("the link's target now belongs to %d", st.Uid)
	}
}

// F4: under a root daemon, /, system directories, one inside or above
// one, root's home and the parent of the users' homes are refused; a
// project directory elsewhere is not.
func TestSystemWorkspaceIsRefusedUnderRoot(t *testing.T) {
	testenv.NeedRoot(t, "the rule is a root daemon's")
	e := newEnv(t)
	for _, ws := range []string{"/", "/etc", "/etc/ssh", "/root", "/home", "/usr/lib", "/var"} {
		if _, err := os.Stat(ws); err != nil {
			continue
		}
		_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo", Workspace: ws})
		wantWorkspaceRefused(t, ws, err)
	}
	e.create(berth.CreateRequest{Workspace: t.TempDir()})
}

// F1 end to end over bwrap as a root daemon: session A's workspace is
// given to the sandbox's uid; a link its agent plants there (a directory
// of the host behind the name of B's workspace, a subdirectory of A's) is
// refused as C's workspace at create, and B, created while the name was a
// real directory, is refused its resume (400 naming the link) and stays
// stopped as it was. The link's target keeps its owner.
func TestWorkspaceLinkPlantedBySandboxBwrap(t *testing.T) {
	testenv.NeedRoot(t, "the chown walk is a root daemon's")
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	e := newEnv(t, func(o *Options) {
		o.Providers = append(o.Providers, p)
		o.Sandbox.Default = berth.SandboxBwrap
	})
	ctx := context.Background()
	parent, victim := t.TempDir(), t.TempDir()
	secret := filepath.Join(victim, "secret")
	if err := os.WriteFile(secret, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	wsA := filepath.Join(parent, "wsA")
	sub := filepath.Join(wsA, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	e.create(berth.CreateRequest{Workspace: wsA})
	b := e.create(berth.CreateRequest{Workspace: sub})
	if _, err := e.m.StopSession(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(wsA, &st); err != nil || st.Uid != bwrap.DefaultHostUID {
		t.Fatalf("A's workspace belongs to %d (%v), want the sandbox's uid", st.Uid, err)
	}
	// What A's agent may do in its own workspace: swap sub for a link.
	if err := os.Rename(sub, filepath.Join(wsA, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(sub, bwrap.DefaultHostUID, bwrap.DefaultHostUID); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: sub})
	wantWorkspaceRefused(t, sub, err)

	_, err = e.m.ResumeSession(ctx, b.ID)
	wantWorkspaceRefused(t, sub, err)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("resume: %v, want an error naming the link", err)
	}
	got, err := e.m.GetSession(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateStopped || got.StopReason != berth.StopUserRequested {
		t.Errorf("B after the refused resume: state %s, reason %s; want it left stopped as it was", got.State, got.StopReason)
	}
	for _, path := range []string{victim, secret} {
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 {
			t.Errorf("%s now belongs to %d", path, st.Uid)
		}
	}
}

// dirMode makes dir with exactly mode (the umask aside) and returns it.
func dirMode(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantRefusedBecause checks err is the workspace's 400 and its message
// says why (want).
func wantRefusedBecause(t *testing.T, ws string, err error, want string) {
	t.Helper()
	wantWorkspaceRefused(t, ws, err)
	if err == nil || !strings.Contains(err.Error(), "refused: "+want) {
		t.Errorf("workspace %s: %v, want it refused because %q", ws, err, want)
	}
}

// A directory people share is refused as a workspace, under a root
// daemon and any other alike: a sticky or world-writable one (the host's
// /tmp and /var/tmp among them), one below a world-writable directory
// anyone could swap it in, the system and mount-point directories. Nothing
// is stored and nothing of them changes.
func TestSharedWorkspaceIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := t.TempDir()
	open := dirMode(t, filepath.Join(base, "open"), 0o777)
	refused := map[string]string{
		dirMode(t, filepath.Join(base, "sticky"), 0o777|os.ModeSticky): "it is sticky or every user may write it",
		dirMode(t, filepath.Join(base, "everyone"), 0o777):             "it is sticky or every user may write it",
		dirMode(t, filepath.Join(open, "project"), 0o755):              "a directory above it is writable by every user",
	}
	for _, ws := range []string{"/tmp", "/var/tmp", "/mnt", "/media", "/srv", "/home", "/", "/usr", "/etc"} {
		if fi, err := os.Stat(ws); err == nil && fi.IsDir() {
			refused[resolvedPath(ws)] = "it is a system directory or one people share"
		}
	}
	before := map[string]syscall.Stat_t{}
	for ws, why := range refused {
		var st syscall.Stat_t
		if err := syscall.Stat(ws, &st); err != nil {
			t.Fatal(err)
		}
		before[ws] = st
		_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: ws})
		wantRefusedBecause(t, ws, err, why)
	}
	if page, err := e.m.ListSessions(ctx, berth.SessionFilter{}); err != nil || len(page.Sessions) != 0 {
		t.Errorf("sessions after the refusals: %+v, %v", page, err)
	}
	for ws, was := range before {
		var st syscall.Stat_t
		if err := syscall.Stat(ws, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != was.Mode || st.Uid != was.Uid {
			t.Errorf("%s changed: mode %o uid %d, was %o %d", ws, st.Mode, st.Uid, was.Mode, was.Uid)
		}
	}
	// The control: a project directory of one's own below a sticky one.
	e.create(berth.CreateRequest{Workspace: dirMode(t, filepath.Join(base, "sticky", "project"), 0o755)})
}

// A child's workspace goes through the same check: a shared directory
// inside its parent's workspace is refused, and so is the parent's own
// once it became one.
func TestChildWorkspaceIsChecked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := dirMode(t, filepath.Join(t.TempDir(), "project"), 0o755)
	parent := e.create(berth.CreateRequest{Workspace: ws})
	shared := dirMode(t, filepath.Join(ws, "drop"), 0o777|os.ModeSticky)
	for _, req := range []berth.CreateRequest{{Workspace: shared}, {}} {
		if req.Workspace == "" {
			// The parent's own, inherited, made world-writable since.
			dirMode(t, ws, 0o777)
		}
		_, err := e.m.SpawnChild(ctx, parent.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 600, Workspace: req.Workspace}, "")
		want := req.Workspace
		if want == "" {
			want = ws
		}
		wantRefusedBecause(t, want, err, "it is sticky or every user may write it")
	}
}

// A child asking for a workspace outside its parent's is refused before
// the path is looked at: a sandboxed parent learns nothing of the host's
// files from the answer (a path that does not exist, or is /tmp, answers
// the same 403 as any other).
func TestChildWorkspaceOutsideTheParentsIsRefusedUnseen(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := dirMode(t, filepath.Join(t.TempDir(), "project"), 0o755)
	parent := e.create(berth.CreateRequest{Workspace: ws})
	for _, dir := range []string{"/nonexistent-berth-test/x", "/tmp", ws + "/../elsewhere", filepath.Dir(ws)} {
		_, err := e.m.SpawnChild(ctx, parent.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 600, Workspace: dir}, "")
		if !berth.IsCode(err, berth.EForbidden) || strings.Contains(berth.ErrorMessage(err), dir) {
			t.Errorf("child workspace %s: %v, want 403 naming no path", dir, err)
		}
	}
}

// A workspace holding files of several other users (two uids that are
// neither root, the daemon's user nor a sandbox uid of berth's) is
// refused; one other user's project is not, nor one whose second owner
// is berth's own bwrap host uid.
func TestWorkspaceOfSeveralUsersIsRefused(t *testing.T) {
	testenv.NeedRoot(t, "files of other users are made with chown")
	// Only a provider that can run is asked for the uid its sandboxes write as.
	p := bwrap.New(bwrap.Options{})
	if err := p.Probe(context.Background()); err != nil {
		testenv.Missing(t, "bwrap", "bwrap cannot make sandboxes here: %v", err)
	}
	e := newEnv(t, func(o *Options) { o.Providers = append(o.Providers, p) })
	ctx := context.Background()
	project := func(owners ...int) string {
		ws := dirMode(t, filepath.Join(t.TempDir(), "project"), 0o755)
		for i, uid := range owners {
			f := filepath.Join(ws, fmt.Sprintf("f%d", i))
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(f, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		return ws
	}
	shared := project(4343, 4444)
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Workspace: shared})
	wantRefusedBecause(t, shared, err, "it holds files of several other users")
	e.create(berth.CreateRequest{Workspace: project(4343, 4343, 0)})
	e.create(berth.CreateRequest{Workspace: project(4343, bwrap.DefaultHostUID)})
}

// A workspace that became shared since the create is refused its resume
// with the same 400, and the session stays stopped as it was; made the
// user's own again, it resumes.
func TestResumeRefusesAWorkspaceThatBecameShared(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := dirMode(t, filepath.Join(t.TempDir(), "project"), 0o755)
	s := e.create(berth.CreateRequest{Workspace: ws})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	dirMode(t, ws, 0o777)
	_, err := e.m.ResumeSession(ctx, s.ID)
	wantRefusedBecause(t, ws, err, "it is sticky or every user may write it")
	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateStopped || got.StopReason != berth.StopUserRequested || got.Failure != nil {
		t.Errorf("after the refused resume: %s %s %+v, want stopped as it was", got.State, got.StopReason, got.Failure)
	}
	dirMode(t, ws, 0o755)
	if got, err := e.m.ResumeSession(ctx, s.ID); err != nil || got.State != berth.StateActive {
		t.Fatalf("resume of the workspace made private again: %+v, %v", got, err)
	}
}

// A worktree's repository goes through the same check (its writable parts
// are given to the sandbox as a workspace's are): one in a world-writable
// directory is refused, naming worktree.repo.
func TestWorktreeRepoThatIsSharedIsRefused(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	repo := newRepo(t)
	dirMode(t, repo, 0o777)
	_, err := e.m.CreateSession(context.Background(), berth.CreateRequest{Agent: "demo",
		Worktree: &berth.WorktreeRequest{Repo: repo, Branch: "agent/x"}})
	var be *berth.Error
	if !errors.As(err, &be) || be.Code != berth.EInvalid || be.Details["field"] != "worktree.repo" ||
		!strings.Contains(be.Message, "worktree.repo "+repo+" refused: it is sticky or every user may write it") {
		t.Errorf("worktree of a world-writable repository: %v, want a 400 on worktree.repo saying why", err)
	}
	if branches := git(t, repo, "branch", "--format=%(refname:short)"); branches != "main" {
		t.Errorf("branches after the refusal: %q", branches)
	}
}

// ownerProvider is a provider whose sandboxes write as uid, counting the
// times it is asked.
type ownerProvider struct {
	capsProvider
	uid   int
	asked *atomic.Int32
	// down is what its probe answers.
	down error
}

func (p ownerProvider) Probe(context.Context) error { return p.down }

func (p ownerProvider) FileOwner() (uid, gid int, ok bool) {
	p.asked.Add(1)
	return p.uid, p.uid, true
}

// The uids whose files in a workspace are berth's come from the providers
// that work here: one whose probe failed at Open is not asked (docker's
// would dial an absent engine under a lock for every create and reattach).
func TestSandboxUIDsAskOnlyTheProvidersThatWork(t *testing.T) {
	var upAsked, downAsked atomic.Int32
	up := ownerProvider{capsProvider{name: "up"}, 1234, &upAsked, nil}
	down := ownerProvider{capsProvider{name: "down"}, 5678, &downAsked, berth.Errorf(berth.EUnavailable, "no engine")}
	m := New(Options{Providers: []berth.SandboxProvider{up, down}})
	m.probes.Start(context.Background())
	defer m.probes.Close(context.Background())
	if got := m.place.sandboxUIDs(); !slices.Equal(got, []int{1234}) {
		t.Errorf("sandbox uids = %v, want the working provider's [1234]", got)
	}
	if n := downAsked.Load(); n != 0 {
		t.Errorf("the provider whose probe failed was asked %d times", n)
	}
	if n := upAsked.Load(); n != 1 {
		t.Errorf("the working provider was asked %d times, want 1", n)
	}
}
