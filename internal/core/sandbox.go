package core

import (
	"context"
	"io"
	"os"
	"time"
)

// Sandbox provider names.
const (
	SandboxAuto   = "auto"
	SandboxHost   = "host"
	SandboxBwrap  = "bwrap"
	SandboxDocker = "docker"
)

// SandboxProviders are the providers' names, as sessions and the config
// spell them (SandboxAuto picks one).
var SandboxProviders = []string{SandboxHost, SandboxBwrap, SandboxDocker}

// SandboxCapabilities says what a provider's sandboxes are and can do:
// whoever uses a provider asks it this, never its name.
type SandboxCapabilities struct {
	// Isolation ranks how well the sandbox holds its processes in: 0 is
	// none (they run as the daemon's user on the host); a child's sandbox
	// is never ranked below its parent's.
	Isolation int
	// Preferred says SandboxAuto picks it where it works, Fallback that
	// SandboxAuto falls back to it (with a warning) where none preferred
	// does.
	Preferred, Fallback bool
	// HostPaths says a host path names the same file inside (the agent's
	// program, the berth tools socket are found where they are on the
	// host); false for a container's own filesystem.
	HostPaths bool
	// Binds says SandboxConfig.Binds and the berth tools directory are
	// bound in; false when the sandbox sees the host as it is (nothing to
	// bind, nothing hidden either).
	Binds bool
	// HostNetwork says the sandbox always has the host's network, whatever
	// SandboxConfig.Network says.
	HostNetwork bool
	// Limits says SandboxLimits are enforced (memory only where the host
	// lets it: SandboxMemoryLimiter).
	Limits bool
}

// SandboxProvider makes sandboxes of one kind (host, bwrap, docker).
type SandboxProvider interface {
	// Name is the provider's name as sessions and the config spell it.
	Name() string
	// Capabilities says what its sandboxes are and can do.
	Capabilities() SandboxCapabilities
	// Probe reports whether the provider works on this host; its error
	// (EUnavailable) says why not.
	Probe(ctx context.Context) error
	// Open prepares a sandbox for one session. EUnavailable when the
	// provider cannot serve it, EForbidden when policy refuses it.
	Open(ctx context.Context, spec SandboxConfig) (Sandbox, error)
}

// SandboxConfig is what a provider needs to build one session's sandbox.
type SandboxConfig struct {
	SessionID string
	// Workspace is the absolute workspace directory, bound read-write.
	Workspace string
	// Home is the session's private HOME directory on the host.
	Home string
	// Env is the environment the agent gets, already filtered.
	Env     map[string]string
	Network bool
	// Binds are host paths made visible inside the sandbox at Target: the
	// agent's own program (its npm package, its interpreter) when it lives
	// outside the system directories, berth's tools socket. (The agent's
	// home_files are copies in Home, not binds.)
	Binds []Bind
	// Image is the container image (docker only; "" means the provider's
	// default).
	Image string
	// Limits are the resource limits the provider enforces where it can.
	Limits SandboxLimits
	// Hide are host paths no process in the sandbox may see: the daemon's
	// home (its socket, database, run directory), and its socket and
	// database when they live elsewhere. One that lies inside the
	// workspace, the home or a bind is covered there (an empty directory,
	// an empty file); the session's own home and binds inside it stay
	// visible.
	Hide []string
	// WorkspaceOwners are the uids, besides root and the daemon's user,
	// whose files a workspace may hold and still be one user's project:
	// berth's own sandboxes' host uids (SandboxFileOwner). A provider
	// that gives the workspace's files to another uid (a root daemon's)
	// checks with them, on the directory it pinned and before it changes
	// anything, that the workspace is not a directory people share
	// (internal/wsdir.Check): EInvalid otherwise.
	WorkspaceOwners []int
	// ManagedWorkspace says the workspace lies in berth's own managed
	// directory ($BERTH_HOME/workspaces): it is not checked.
	ManagedWorkspace bool
}

// Bind makes one host path visible inside a sandbox.
type Bind struct {
	Source string
	Target string
	// Writable binds read-write; binds are read-only by default.
	Writable bool
}

// SandboxLimits bound what one session's processes may use; zero means
// the provider's default. Which a provider enforces is in its docs.
type SandboxLimits struct {
	// MemoryBytes bounds the memory (swap included) of every process of
	// the sandbox together; files in its private /tmp count too.
	MemoryBytes int64
	// NanoCPUs is CPU time in billionths of a CPU.
	NanoCPUs  int64
	Pids      int64
	OpenFiles uint64
	// TmpBytes bounds the size of the sandbox's private /tmp (and
	// /var/tmp, each); 0 leaves the kernel's default, half the host's
	// memory.
	TmpBytes int64
}

// SandboxMemoryLimiter is implemented by providers that enforce
// SandboxLimits.MemoryBytes only on some hosts (bwrap needs a memory
// cgroup it may create). LimitsMemory is nil when this host allows it,
// else an error saying why not; Open then refuses a MemoryBytes with
// EUnavailable rather than run without the limit.
type SandboxMemoryLimiter interface {
	LimitsMemory() error
}

// Sandbox runs processes for one session.
type Sandbox interface {
	// Start starts a process inside the sandbox, in its own process group.
	Start(ctx context.Context, spec ProcSpec) (Process, error)
	// Close releases the sandbox (containers, mounts). It does not touch
	// the workspace.
	Close(ctx context.Context) error
}

// ProcSpec describes one process to start in a sandbox.
type ProcSpec struct {
	Path string
	Args []string
	// Env is added to the sandbox's environment ("K=V").
	Env []string
	// Dir is the working directory; empty means the workspace.
	Dir string
	// Stdin, when nil, gives the process a pipe reachable through Process.Stdin.
	Stdin io.Reader
	// Input, with Stdin nil, is on that pipe before anything written to
	// Process.Stdin: the provider writes it as soon as the pipe is made,
	// while the process still starts. At most MaxProcInput bytes, which
	// any pipe's buffer takes whole (EInvalid past it).
	Input []byte
	// Stdout and Stderr, when nil, are pipes reachable through Process.
	Stdout io.Writer
	Stderr io.Writer
}

// MaxProcInput bounds ProcSpec.Input: a pipe's buffer is one page at
// least, however short the system runs of pipe memory.
const MaxProcInput = 4096

// ExitStatus is how a process ended.
type ExitStatus struct {
	Code   int    `json:"exit_code"`
	Signal string `json:"signal,omitempty"`
	// OOMKills is how many processes of the sandbox the kernel killed for
	// want of memory (its memory limit reached) while this one ran: the
	// process itself, or others. 0 where the provider cannot tell.
	OOMKills int64 `json:"oom_kills,omitempty"`
}

// Success reports whether the process exited 0 without a signal.
func (e ExitStatus) Success() bool { return e.Code == 0 && e.Signal == "" }

// Process is one process started in a sandbox.
type Process interface {
	// Pid is the process id, which is also its process group id.
	Pid() int
	// Stdin, Stdout and Stderr are the pipes asked for in ProcSpec (nil
	// when the caller gave its own).
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// Wait waits for the process to exit and reaps it. It may be called
	// from several goroutines; all get the same status.
	Wait() (ExitStatus, error)
	// Signal sends sig to the whole process group.
	Signal(sig os.Signal) error
	// Stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the
	// group, and reaps. It is idempotent.
	Stop(ctx context.Context, grace time.Duration) (ExitStatus, error)
}

// SandboxReopener is implemented by providers whose sandboxes are objects
// of their own (a container) that more than one process may hold: Reopen
// returns a handle on the sandbox ref names, made by another Open (a
// shim's), instead of making a second one. ENotFound when it is gone.
type SandboxReopener interface {
	Reopen(ctx context.Context, spec SandboxConfig, ref string) (Sandbox, error)
}

// SandboxRef is implemented by sandboxes a SandboxReopener can reopen.
type SandboxRef interface {
	// Ref names the sandbox for Reopen.
	Ref() string
}

// SandboxFileOwner is implemented by providers whose sandboxed processes
// own what they write on the host as a user other than the daemon's (a
// root daemon's bwrap sandboxes run as [sandbox] host_uid, and so do its
// docker containers, unless the engine maps their uid to one of its
// subordinate ids). Files and directories berth itself makes in a
// workspace for the agent (fs/write_text_file) are given to that user, so
// that the agent can change them.
type SandboxFileOwner interface {
	// FileOwner is the host uid and gid the sandbox's files belong to;
	// ok is false when they belong to the daemon's user.
	FileOwner() (uid, gid int, ok bool)
}
