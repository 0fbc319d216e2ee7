package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// An agent in a bwrap sandbox plants, in its workspace, a link to a host
// secret, a hard link attempt and a directory chain deeper than the walk
// goes: the checkpoint before its next turn is still taken (the deep part
// listed, the links left out), and neither a rewind nor a fork from it
// brings a host file into a workspace.
func TestAgentPlantedTreesInABwrapWorkspace(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	e := bwrapEnv(t, withCheckpoints(home, state))
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermApproveAll})
	if s.State != berth.StateActive {
		t.Fatalf("state %s: %+v", s.State, s.Failure)
	}
	e.prompt(s.ID, "write a.txt one")
	r := e.sh(s.ID, `ln -s `+secret+` secret; ln -s /etc/passwd passwd; ln /etc/passwd hard 2>/dev/null;
		i=0; while [ $i -lt 300 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done; echo deep > bottom.txt`)
	if r.ExitCode != 0 {
		t.Fatalf("planting: %+v", r)
	}
	e.prompt(s.ID, "write a.txt two")
	list, err := e.m.ListCheckpoints(ctx, s.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("checkpoints %v %v", list, err)
	}
	c := list[1]
	why := map[string]string{}
	for _, sk := range c.Skipped {
		why[sk.Path] = sk.Reason
	}
	if why["secret"] != checkpoint.SkipLinkOutside || why["passwd"] != checkpoint.SkipLinkOutside ||
		why[strings.Repeat("d/", checkpoint.MaxDepth)+"d"] != checkpoint.SkipTooDeep {
		t.Fatalf("skipped %v", c.Skipped)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: c.ID}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, s.Workspace, "a.txt") != "one" {
		t.Fatal("the rewind did not restore a.txt")
	}
	f, err := e.m.Fork(ctx, s.ID, berth.ForkRequest{CheckpointID: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"secret", "passwd", "hard"} {
		if _, err := os.Lstat(filepath.Join(f.Workspace, p)); err == nil {
			t.Errorf("the fork holds %s", p)
		}
	}
	err = filepath.WalkDir(f.Workspace, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "host secret") || strings.Contains(string(b), "root:") {
			t.Errorf("the fork holds a host file at %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stdout; strings.Contains(got, "host secret") {
		t.Fatalf("the sandbox read the secret: %q", got)
	}
}

// A parent session's agent replaces its child's workspace (a directory of
// its own) with a link to a host directory: the child's next checkpoint
// does not read the host directory, and a rewind of the child does not
// write into it (under a root daemon, /etc), nor does a fork copy it.
func TestChildWorkspaceSwappedForALinkIsNotCheckpointedNorRewound(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	e := bwrapEnv(t, withCheckpoints(home, state))
	ctx := context.Background()
	host := t.TempDir()
	for _, name := range []string{"shadow", "gshadow", "sudoers"} {
		if err := os.WriteFile(filepath.Join(host, name), []byte("host secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parent := e.create(berth.CreateRequest{PermissionMode: berth.PermApproveAll})
	if r := e.sh(parent.ID, "mkdir sub"); r.ExitCode != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	child := e.spawn(parent.ID, berth.CreateRequest{Workspace: filepath.Join(parent.Workspace, "sub")})
	e.prompt(child.ID, "write a.txt one")
	if r := e.sh(parent.ID, "mv sub sub.old && ln -s "+host+" sub"); r.ExitCode != 0 {
		t.Fatalf("swap: %+v", r)
	}
	e.prompt(child.ID, "echo hi")
	list, err := e.m.ListCheckpoints(ctx, child.ID)
	if err != nil || len(list) == 0 {
		t.Fatalf("checkpoints %v %v", list, err)
	}
	for _, c := range list {
		if c.Files > 1 {
			t.Fatalf("a checkpoint of the child read %d files: %+v", c.Files, c)
		}
	}
	if _, err := e.m.Rewind(ctx, child.ID, berth.RewindRequest{CheckpointID: list[0].ID}); err == nil {
		t.Fatal("the child's workspace was rewound through the link")
	}
	ents, err := os.ReadDir(host)
	if err != nil || len(ents) != 3 {
		t.Fatalf("the host directory changed: %v %v", ents, err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "shadow")); string(b) != "host secret" {
		t.Fatalf("shadow = %q", b)
	}
	f, err := e.m.Fork(ctx, child.ID, berth.ForkRequest{CheckpointID: list[len(list)-1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.Workspace, "shadow")); err == nil {
		t.Fatal("the fork holds the host file")
	}
}
