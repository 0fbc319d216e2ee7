package bwrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// ownerOf is the host uid and gid of path.
func ownerOf(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

// rootsWorkspace makes a workspace and a home under a directory only
// root may cross, as a temporary directory or root's home is.
func rootsWorkspace(t *testing.T) (parent, ws, home string) {
	t.Helper()
	parent = t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	ws, home = filepath.Join(parent, "ws"), filepath.Join(parent, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return parent, ws, home
}

// A root daemon's sandbox runs as the host uid: uid 1000 inside maps to
// it, not to root, so that what the sandbox writes belongs to it. The
// workspace sits under a directory only root may cross, as a temporary
// directory or root's home does; its root-owned files are given to the
// host uid, but not one with another link outside.
func TestHostUID(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon changes uid")
	for _, want := range []int{DefaultHostUID, 123456} {
		t.Run(fmt.Sprint(want), func(t *testing.T) {
			provider(t)
			p := New(Options{HostUID: want, EtcView: testEtcView})
			if want == DefaultHostUID {
				p = New(Options{EtcView: testEtcView})
			}
			parent, ws, home := rootsWorkspace(t)
			if err := os.WriteFile(filepath.Join(ws, "given.txt"), []byte("root's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(parent, "outside.txt")
			if err := os.WriteFile(outside, []byte("linked"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(outside, filepath.Join(ws, "linked.txt")); err != nil {
				t.Fatal(err)
			}
			// Credentials of root's, 0600, bound read-only as home_files are.
			creds := filepath.Join(parent, "auth.json")
			if err := os.WriteFile(creds, []byte("root-only-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := berth.SandboxConfig{SessionID: "ses_hostuid", Workspace: ws, Home: home,
				Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"},
					{Source: creds, Target: filepath.Join(home, ".tool", "auth.json")}}}
			sb, err := p.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			out, st := run(t, sb.(*Sandbox), `B=/.berth/busybox
$B id -u
echo new > new.txt && $B mkdir dir && echo more >> given.txt && echo home > "$HOME/h.txt" && echo WROTE
$B cat "$HOME/.tool/auth.json"; echo
echo stolen > "$HOME/.tool/auth.json" && echo CREDS_WRITTEN
true`)
			if !st.Success() || !strings.Contains(out, "WROTE") {
				t.Fatalf("status %+v, output %q", st, out)
			}
			if !strings.Contains(out, "root-only-token") {
				t.Errorf("the read-only credentials of root's are not readable inside: %q", out)
			}
			if b, _ := os.ReadFile(creds); strings.Contains(out, "CREDS_WRITTEN") || string(b) != "root-only-token" {
				t.Errorf("the read-only credentials were written: %q, %q", out, b)
			}
			if !strings.HasPrefix(out, "1000\n") {
				t.Errorf("inside: %q, want uid 1000", out)
			}
			for _, path := range []string{ws, home, filepath.Join(ws, "new.txt"), filepath.Join(ws, "dir"), filepath.Join(ws, "given.txt"), filepath.Join(home, "h.txt")} {
				if uid, gid := ownerOf(t, path); uid != uint32(want) || gid != uint32(want) {
					t.Errorf("%s belongs to %d:%d, want %d:%d", path, uid, gid, want, want)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "given.txt")); string(b) != "root's\nmore\n" {
				t.Errorf("given.txt = %q", b)
			}
			if uid, _ := ownerOf(t, outside); uid != 0 {
				t.Errorf("a file linked from outside the workspace was given to %d", uid)
			}
			if uid, gid, ok := p.FileOwner(); !ok || uid != want || gid != want {
				t.Errorf("FileOwner = %d, %d, %v; want %d", uid, gid, ok, want)
			}
			stage := sb.(*Sandbox).stage.dir.path
			if err := sb.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(stage); !os.IsNotExist(err) {
				t.Errorf("the stage directory is left after Close: %v", err)
			}
		})
	}
}

// F1: session A's agent owns A's workspace and swaps B's workspace, a
// directory inside it, for a symbolic link to a directory of the host.
// B's open sandbox runs nothing more there (what a new process would get
// bound is not the directory it pinned); a sandbox opened on the swapped
// path is refused; the link's target keeps its owner throughout.
func TestHostUIDWorkspaceSwappedForALink(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon changes uid")
	provider(t)
	p := New(Options{})
	parent, victim := t.TempDir(), t.TempDir()
	secret := filepath.Join(victim, "secret")
	if err := os.WriteFile(secret, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	wsA := filepath.Join(parent, "wsA")
	wsB := filepath.Join(wsA, "sub")
	if err := os.MkdirAll(wsB, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(wsA, DefaultHostUID, DefaultHostUID); err != nil {
		t.Fatal(err)
	}
	cfg := berth.SandboxConfig{SessionID: "ses_swapped", Workspace: wsB,
		Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}}}

	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if out, st := run(t, sb.(*Sandbox), `echo before > before.txt && echo WROTE`); !st.Success() || !strings.Contains(out, "WROTE") {
		t.Fatalf("before the swap: status %+v, output %q", st, out)
	}
	// The swap: B's workspace moved aside, a link in its place.
	if err := os.Rename(wsB, filepath.Join(wsA, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, wsB); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	proc, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox",
		Args:  []string{"sh", "-c", "echo planted > mine.txt; ls"},
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out})
	if err == nil {
		st, _ := proc.Wait()
		if st.Success() {
			t.Errorf("a process started after the swap ran: %q", out.String())
		}
	}
	if _, err := os.Lstat(filepath.Join(victim, "mine.txt")); err == nil {
		t.Error("the write landed in the link's target")
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A sandbox opened on the swapped path is refused.
	if sb, err := p.Open(context.Background(), cfg); err == nil {
		_ = sb.Close(context.Background())
		t.Error("Open followed the link planted at the workspace's path")
	} else if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open: %v, want invalid_argument naming the link", err)
	}
	for _, path := range []string{victim, secret} {
		if uid, _ := ownerOf(t, path); uid != 0 {
			t.Errorf("%s now belongs to %d", path, uid)
		}
	}
}

// A root daemon's sandbox refuses, on the directory it pinned and before
// anything changes hands, a workspace people share: a sticky one like the
// host's /tmp (its mode, root's file and another user's directory stay as
// they were), or one holding files of two users that are not berth's own
// (SandboxConfig.WorkspaceOwners names those).
func TestHostUIDRefusesASharedWorkspace(t *testing.T) {
	testenv.NeedRoot(t, "only a root daemon gives files away")
	provider(t)
	p := New(Options{})
	ctx := context.Background()
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	secret, other := filepath.Join(shared, "secret"), filepath.Join(shared, "other")
	if err := os.WriteFile(secret, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 4343, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	open := func(owners []int) error {
		sb, err := p.Open(ctx, berth.SandboxConfig{SessionID: "ses_shared", Workspace: shared, WorkspaceOwners: owners})
		if err == nil {
			return sb.Close(ctx)
		}
		return err
	}
	if err := open(nil); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("Open of a sticky workspace: %v, want invalid_argument saying why", err)
	}
	// Not sticky, but two other users' files.
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(other, "f"), 4444, 4444); err != nil {
		t.Fatal(err)
	}
	if err := open(nil); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "several other users") {
		t.Errorf("Open of a workspace of two other users: %v, want invalid_argument saying why", err)
	}
	for path, want := range map[string]uint32{shared: 0, secret: 0, other: 4343} {
		if uid, _ := ownerOf(t, path); uid != want {
			t.Errorf("%s belongs to %d after the refusals, want %d", path, uid, want)
		}
	}
	// The control: the second user is berth's own; root's files change hands.
	if err := open([]int{4444}); err != nil {
		t.Fatalf("Open with the second user berth's own: %v", err)
	}
	if uid, _ := ownerOf(t, secret); uid != DefaultHostUID {
		t.Errorf("root's file in an accepted workspace belongs to %d, want the host uid", uid)
	}
}
