package session

import (
	"fmt"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/internal/wsdir"
)

// checkWorkspace refuses (400 naming field) the directory at the
// resolved path ws when it is not one user's project but a directory
// people share (wsdir.Check), but for one in berth's managed directory,
// which is berth's own. It is opened as a sandbox opens it, without
// following a link on its path, and checked through that descriptor.
func (pl *placement) checkWorkspace(ws, field string) error {
	if pathx.Within(pl.ownPaths().workspaces, ws) {
		return nil
	}
	f, err := wsdir.OpenNoFollow(ws)
	if err != nil {
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("%s %s cannot be opened: %s", field, ws, berth.ErrorMessage(err)),
			Details: map[string]any{"field": field}, Err: err}
	}
	defer f.Close()
	return wsdir.Check(f, ws, field, pl.sandboxUIDs())
}

// sandboxUIDs are the host uids berth's own sandboxes write as, besides
// root and the daemon's user (a root daemon's bwrap host_uid, docker's
// container uid): their files in a workspace are berth's, not another
// user's. A provider whose probe failed runs nothing here and is
// not asked: docker's would dial an engine that is not there, under
// a lock, for every create and every reattach.
func (pl *placement) sandboxUIDs() []int {
	var out []int
	for name, p := range pl.m.providers {
		if pl.m.availability(name) != nil {
			continue
		}
		if fo, ok := p.(berth.SandboxFileOwner); ok {
			if uid, _, _ := fo.FileOwner(); uid > 0 && !slices.Contains(out, uid) {
				out = append(out, uid)
			}
		}
	}
	slices.Sort(out)
	return out
}
