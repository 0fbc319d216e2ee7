package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
// real directory, fails to start on resume: stopped/startup_failed naming
// the link. The link's target keeps its owner.
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

	if _, err := e.m.ResumeSession(ctx, b.ID); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("resume: %v, want an error naming the link", err)
	}
	got, err := e.m.GetSession(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateStopped || got.StopReason != berth.StopStartupFailed || got.Failure == nil ||
		!strings.Contains(got.Failure.Message, "symbolic link") {
		t.Errorf("B after resume: state %s, reason %s, failure %+v; want stopped/startup_failed naming the link", got.State, got.StopReason, got.Failure)
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
