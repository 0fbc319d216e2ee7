package docker

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// setIDBits are the mode bits no file made or changed in a container may
// carry: S_ISUID and S_ISGID.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// modeArgs are the system calls that set a file's mode, with the index of
// the argument that holds it.
var modeArgs = map[string]uint{
	"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"creat": 1, "open": 2, "openat": 3,
	"mknod": 1, "mknodat": 2,
}

// seccompProfile is the seccomp profile of every container, as the JSON
// HostConfig.SecurityOpt carries ("seccomp=<json>"): Docker's default
// profile (github.com/moby/profiles/seccomp), except that
//
//   - chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mknod and
//     mknodat are allowed only when the mode they pass has neither S_ISUID
//     nor S_ISGID (and fail with EPERM, the profile's default, otherwise):
//     nothing the agent writes keeps a set-id bit, so no file it leaves in
//     the workspace runs with the rights of its owner on the host;
//   - openat2, whose mode is in a structure a filter cannot read, fails
//     with ENOSYS: programs fall back to openat.
//
// (io_uring is not in Docker's default profile already.)
var seccompProfile = sync.OnceValue(func() string {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool {
			_, isMode := modeArgs[n]
			return isMode || n == "openat2"
		})
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(sc *seccomp.Syscall) bool { return len(sc.Names) == 0 && sc.Name == "" })
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range modeArgs {
			if !yield(n) {
				return
			}
		}
	}) {
		p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
			Names:  []string{name},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: modeArgs[name], Value: setIDBits, ValueTwo: 0, Op: specs.OpMaskedEqual}},
		}})
	}
	nosys := uint(unix.ENOSYS)
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
		Names: []string{"openat2"}, Action: specs.ActErrno, ErrnoRet: &nosys,
	}})
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("docker: the seccomp profile does not marshal: %v", err))
	}
	return string(b)
})
