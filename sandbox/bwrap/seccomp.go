package bwrap

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// setIDBits are the mode bits no file made or changed in a sandbox may
// carry: S_ISUID and S_ISGID.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// x32SyscallBit marks a system call of the x32 ABI on amd64.
const x32SyscallBit = 0x40000000

// cloneNamespaceFlags are the clone flags that make a namespace
// (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET):
// Docker's default profile refuses clone with any of them, as this does.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedPersonas are the personality(2) arguments allowed, as in
// Docker's default profile: the default persona (PER_LINUX), PER_LINUX32,
// UNAME26 with either, and 0xffffffff (a query). The others (turning off
// address-space randomisation, READ_IMPLIES_EXEC…) fail with EPERM.
var allowedPersonas = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// denied is one system call the filter refuses, by name (Docker's, for
// the test that keeps the list in step with Docker's default profile).
type denied struct {
	name string
	nr   uint32
}

// modeRule names a system call that sets a file's mode, and which of its
// arguments holds the mode.
type modeRule struct {
	nr  uint32
	arg int
}

// Filter actions.
var (
	retAllow  = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	retKill   = bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS}
	retENOSYS = bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}
	retEPERM  = bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
)

// rule is what the filter does with one system call: block runs with the
// call's number in A and ends every path with a return.
type rule struct {
	nr    uint32
	block []bpf.Instruction
}

// argLow loads the low 32 bits of argument i (little-endian
// seccomp_data: amd64 and arm64).
func argLow(i int) bpf.Instruction { return bpf.LoadAbsolute{Off: uint32(16 + 8*i), Size: 4} }

// maskRule refuses (EPERM) the call when argument arg has any of mask's
// bits.
func maskRule(nr uint32, arg int, mask uint32) rule {
	return rule{nr, []bpf.Instruction{
		argLow(arg),
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		retAllow,
		retEPERM,
	}}
}

// oneOfRule allows the call only when argument arg's low 32 bits are one
// of vals (EPERM otherwise), or, with deny, refuses it only then.
func oneOfRule(nr uint32, arg int, vals []uint32, deny bool) rule {
	match, other := bpf.Instruction(retAllow), bpf.Instruction(retEPERM)
	if deny {
		match, other = retEPERM, retAllow
	}
	ins := []bpf.Instruction{argLow(arg)}
	for i, v := range vals {
		// To match: past the comparisons left and other.
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(vals) - 1 - i + 1)})
	}
	return rule{nr, append(ins, other, match)}
}

// rules are the filter's rules, in order.
func rules(deny bool) []rule {
	var rs []rule
	for _, r := range modeRules {
		rs = append(rs, maskRule(r.nr, r.arg, setIDBits))
	}
	// openat2, whose mode is in a structure a filter cannot read, clone3,
	// whose flags are, and io_uring, whose requests a filter never sees:
	// ENOSYS, so that programs fall back to openat, clone and plain
	// system calls.
	for _, nr := range []uint32{unix.SYS_OPENAT2, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		rs = append(rs, rule{nr, []bpf.Instruction{retENOSYS}})
	}
	if !deny {
		return rs
	}
	rs = append(rs, rule{unix.SYS_CLONE3, []bpf.Instruction{retENOSYS}})
	for _, d := range append(deniedCommon, deniedArch...) {
		rs = append(rs, rule{d.nr, []bpf.Instruction{retEPERM}})
	}
	rs = append(rs,
		maskRule(unix.SYS_CLONE, 0, cloneNamespaceFlags),
		// Attaching to another process (the sandbox's own: its pid
		// namespace shows no other) to read or change its memory; a
		// tracer of its own children (PTRACE_TRACEME) still works.
		oneOfRule(unix.SYS_PTRACE, 0, []uint32{unix.PTRACE_ATTACH, unix.PTRACE_SEIZE}, true),
		oneOfRule(unix.SYS_PERSONALITY, 0, allowedPersonas, false),
	)
	return rs
}

// seccompProgram is the filter every bwrap sandbox runs under (bwrap
// --seccomp, loaded by bwrap after it made the sandbox, before it execs
// the program), as struct sock_filter in native byte order:
//
//   - a system call of another architecture (32-bit compatibility calls
//     included) or of the x32 ABI kills the process: none of the rules
//     below can be sidestepped through another call table;
//   - chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mknod and
//     mknodat fail with EPERM when the mode they pass has S_ISUID or
//     S_ISGID: nothing the agent writes keeps a set-id bit, so no file it
//     leaves in the workspace runs with the rights of its owner on the
//     host;
//   - openat2, clone3 and io_uring fail with ENOSYS (see rules);
//   - the calls of deniedCommon and deniedArch fail with EPERM, clone
//     with a namespace flag too, ptrace's PTRACE_ATTACH and PTRACE_SEIZE
//     too, personality other than allowedPersonas too.
//
// Everything else is allowed. With deny false only the first three hold
// (tests compare). ok is false on an architecture the tables do not know
// (the sandbox then runs without the filter).
func seccompProgram(deny bool) (prog []byte, ok bool) {
	if auditArch == 0 {
		return nil, false
	}
	ins := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		retKill,
		bpf.LoadAbsolute{Off: 0, Size: 4},
	}
	if hasX32 {
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1}, retKill)
	}
	for _, r := range rules(deny) {
		if len(r.block) > 255 {
			panic("bwrap: a seccomp rule is too long to jump over")
		}
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(r.block))})
		ins = append(ins, r.block...)
	}
	ins = append(ins, retAllow)
	raw, err := bpf.Assemble(ins)
	if err != nil {
		panic(fmt.Sprintf("bwrap: the seccomp program does not assemble: %v", err))
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, true
}
