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

// modeRule names a system call that sets a file's mode, and which of its
// arguments holds the mode.
type modeRule struct {
	nr  uint32
	arg int
}

// seccompProgram is the filter every bwrap sandbox runs under (bwrap
// --seccomp), as struct sock_filter in native byte order:
//
//   - a system call of another architecture (the x32 ABI and 32-bit
//     compatibility calls included) fails with ENOSYS, so that none of
//     the rules below can be sidestepped through another call table;
//   - chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mknod and
//     mknodat fail with EPERM when the mode they pass has S_ISUID or
//     S_ISGID: nothing the agent writes keeps a set-id bit, so no file it
//     leaves in the workspace runs with the rights of its owner on the
//     host;
//   - openat2, whose mode is in a structure a filter cannot read, and
//     io_uring_setup, whose requests a filter never sees, fail with
//     ENOSYS: programs fall back to openat and plain system calls.
//
// Everything else is allowed. ok is false on an architecture the table
// does not know (the sandbox then runs without the filter).
func seccompProgram() (prog []byte, ok bool) {
	if auditArch == 0 {
		return nil, false
	}
	deny := []uint32{unix.SYS_OPENAT2, unix.SYS_IO_URING_SETUP}
	retAllow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	retENOSYS := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}
	retEPERM := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}

	// Header: the architecture, then the x32 bit; n is the number of
	// syscall comparisons, after which come ALLOW, ENOSYS, then one
	// block of blockLen instructions per mode rule.
	const blockLen = 5
	n := len(modeRules) + len(deny)
	var ins []bpf.Instruction
	ins = append(ins,
		bpf.LoadAbsolute{Off: 4, Size: 4},
		// Another architecture: to ENOSYS, past the rest of the header
		// (2), the comparisons and ALLOW.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipFalse: uint8(2 + n + 1)},
		bpf.LoadAbsolute{Off: 0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipTrue: uint8(n + 1)},
	)
	for i, r := range modeRules {
		// From comparison i to rule i's block: past the remaining
		// comparisons, ALLOW, ENOSYS and the blocks before it.
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipTrue: uint8(n - 1 - i + 2 + blockLen*i)})
	}
	for i, nr := range deny {
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(deny) - 1 - i + 1)})
	}
	ins = append(ins, retAllow, retENOSYS)
	for _, r := range modeRules {
		ins = append(ins,
			// The mode's low 32 bits (little-endian seccomp_data).
			bpf.LoadAbsolute{Off: uint32(16 + 8*r.arg), Size: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: setIDBits},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
			retEPERM,
			retAllow,
		)
	}
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
