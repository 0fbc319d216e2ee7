package session

import (
	"fmt"

	"github.com/berth-sh/berth"
)

// Bounds of a session's memory_mb: below the minimum no agent starts;
// the maximum is far above any host.
const (
	minMemoryMB = 32
	maxMemoryMB = 1 << 24
)

// sandboxLimits resolves the limits of a new session's sandbox: memory_mb
// as asked (within [sandbox] max_memory_mb) or [sandbox] memory_mb, and
// [sandbox] tmp_mb. A memory_mb the session asks for that the provider
// cannot enforce on this host is refused (EUnavailable with the
// provider's reason), never run without; the default is left out there
// (the Session then shows no memory_mb) and warn says so (but for the
// host provider, which bounds nothing).
func (pl *placement) sandboxLimits(req *berth.CreateRequest, provider berth.SandboxProvider) (lim berth.SandboxLimitsInfo, warn string, err error) {
	pol := pl.m.opts.Sandbox
	if req.MemoryMB != 0 && (req.MemoryMB < minMemoryMB || req.MemoryMB > maxMemoryMB) {
		return lim, "", &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("memory_mb must be between %d and %d", minMemoryMB, maxMemoryMB),
			Details: map[string]any{"field": "memory_mb"}}
	}
	if pol.MaxMemoryMB > 0 && req.MemoryMB > pol.MaxMemoryMB {
		return lim, "", &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("memory_mb %d is over [sandbox] max_memory_mb (%d)", req.MemoryMB, pol.MaxMemoryMB),
			Details: map[string]any{"field": "memory_mb", "max_memory_mb": pol.MaxMemoryMB}}
	}
	lim = berth.SandboxLimitsInfo{MemoryMB: req.MemoryMB, TmpMB: int(pol.Limits.TmpBytes >> 20)}
	if lim.MemoryMB == 0 {
		lim.MemoryMB = int(pol.Limits.MemoryBytes >> 20)
	}
	limits := provider.Capabilities().Limits
	if !limits {
		// A provider that enforces no limit has no private /tmp to cap.
		lim.TmpMB = 0
	}
	if lim.MemoryMB > 0 {
		if err := memoryUnenforceable(provider); err != nil {
			if req.MemoryMB > 0 {
				return lim, "", berth.WrapError(berth.EUnavailable, err, "memory_mb cannot be enforced by sandbox %s on this host: %s", provider.Name(), berth.ErrorMessage(err))
			}
			if !limits {
				// Bounds nothing, as the session's sandbox says: no warning
				// beside the one that it is not isolated.
				lim.MemoryMB = 0
				return lim, "", nil
			}
			warn = fmt.Sprintf("[sandbox] memory_mb (%d) is not enforced by sandbox %s on this host: %s", lim.MemoryMB, provider.Name(), berth.ErrorMessage(err))
			lim.MemoryMB = 0
		}
	}
	return lim, warn, nil
}

// memoryUnenforceable is why provider cannot enforce a memory limit here,
// nil when it can.
func memoryUnenforceable(provider berth.SandboxProvider) error {
	if l, ok := provider.(berth.SandboxMemoryLimiter); ok {
		return l.LimitsMemory()
	}
	return nil
}

// boxLimits are the limits a session's sandbox is opened with: the
// policy's, with the memory and /tmp limits the session recorded. A
// session that recorded none (stored before they were, or under a policy
// of none) gets the policy's, its memory limit only where its provider
// can enforce it (as it ran then).
func (pl *placement) boxLimits(s *berth.Session) berth.SandboxLimits {
	lim := pl.m.opts.Sandbox.Limits
	if info := s.Sandbox.Limits; info != (berth.SandboxLimitsInfo{}) {
		lim.MemoryBytes = int64(info.MemoryMB) << 20
		lim.TmpBytes = int64(info.TmpMB) << 20
		return lim
	}
	if p, ok := pl.m.providers[s.Sandbox.Provider]; ok && memoryUnenforceable(p) != nil {
		lim.MemoryBytes = 0
	}
	return lim
}

// inheritMemory makes a child that asks no memory_mb ask for its parent's
// limit (or the default, when lower): a bounded parent's child is bounded
// too, also where the policy has no default, and a provider that cannot
// enforce the limit is refused for it (sandboxLimits), never run without.
// Asking for more than the parent's is 403 naming memory_mb.
func (k *spawn) inheritMemory(req *berth.CreateRequest) error {
	parent := k.parent.Sandbox.Limits.MemoryMB
	if req.MemoryMB != 0 {
		if parent > 0 && req.MemoryMB > parent {
			return forbidden("memory_mb", fmt.Sprintf("memory_mb %d is more than the parent's %d", req.MemoryMB, parent))
		}
		return nil
	}
	mb := parent
	if def := int(k.m.opts.Sandbox.Limits.MemoryBytes >> 20); def > 0 && def < mb {
		mb = def
	}
	if mb >= minMemoryMB {
		req.MemoryMB = mb
	}
	return nil
}
