package berth

import "context"

// Restorer brings a session's files to a node from where they are kept
// off every node, the object store (docs/api.md, "Failover with an object
// store"): a managed session resumed on another node than its own gets
// its workspace and HOME from it, a child of it its HOME.
type Restorer interface {
	// Restore makes workspaceDir and homeDir afresh (what they held, an
	// earlier stay on this node's, is older than the store's) and writes
	// into them the session's managed workspace and private HOME as of its
	// last completed turn. workspaceDir "" restores the HOME alone (a
	// child, whose workspace is in its root's, restored with the root).
	// A session the store never had (no turn of it reached the store)
	// leaves them empty; any other error leaves the session where it was.
	Restore(ctx context.Context, sessionID, workspaceDir, homeDir string) error
}
