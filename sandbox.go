package berth

import "github.com/berth-sh/berth/internal/core"

// Sandbox provider names (internal/core holds the sandbox contract, for
// the shim; see there for each name's documentation).
const (
	SandboxAuto   = core.SandboxAuto
	SandboxHost   = core.SandboxHost
	SandboxBwrap  = core.SandboxBwrap
	SandboxDocker = core.SandboxDocker
)

// SandboxProviders lists the provider names a session may ask for.
var SandboxProviders = core.SandboxProviders

// MaxProcInput bounds ProcSpec.Input (core.MaxProcInput).
const MaxProcInput = core.MaxProcInput

// The sandbox contract: providers, what they are given, and the processes
// they start.
type (
	// SandboxCapabilities is what a provider can do (core.SandboxCapabilities).
	SandboxCapabilities = core.SandboxCapabilities
	// SandboxProvider makes sandboxes (core.SandboxProvider).
	SandboxProvider = core.SandboxProvider
	// SandboxConfig is one sandbox's configuration (core.SandboxConfig).
	SandboxConfig = core.SandboxConfig
	// Bind is a host path made visible in a sandbox (core.Bind).
	Bind = core.Bind
	// SandboxLimits bounds a sandbox's resources (core.SandboxLimits).
	SandboxLimits = core.SandboxLimits
	// SandboxMemoryLimiter is a sandbox whose memory limit can change (core.SandboxMemoryLimiter).
	SandboxMemoryLimiter = core.SandboxMemoryLimiter
	// Sandbox is one sandbox (core.Sandbox).
	Sandbox = core.Sandbox
	// ProcSpec is a process to start in a sandbox (core.ProcSpec).
	ProcSpec = core.ProcSpec
	// ExitStatus is how a process ended (core.ExitStatus).
	ExitStatus = core.ExitStatus
	// Process is a process started in a sandbox (core.Process).
	Process = core.Process
	// SandboxReopener reopens a sandbox after a restart (core.SandboxReopener).
	SandboxReopener = core.SandboxReopener
	// SandboxRef names a sandbox to reopen (core.SandboxRef).
	SandboxRef = core.SandboxRef
	// SandboxFileOwner is a sandbox that hands files to the agent's user (core.SandboxFileOwner).
	SandboxFileOwner = core.SandboxFileOwner
)
