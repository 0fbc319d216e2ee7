package session

// placement says where and how a session runs: the sandbox provider it
// gets and what that sandbox is given (sandbox.go), its workspace and
// the daemon's own paths it must not reach (workspace.go, worktree.go,
// mounts.go), its private HOME and the files copied there (homefiles.go).
type placement struct {
	m *Manager
}
