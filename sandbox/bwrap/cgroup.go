package bwrap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/ids"
)

// cgroupFS is where the host mounts its cgroups: v1 controllers each in a
// directory of their own under it, v2 at it.
const cgroupFS = "/sys/fs/cgroup"

// cgroupRoot is the cgroup of this process, for one controller, under
// which each sandbox gets a child.
type cgroupRoot struct {
	// dir is the directory; "" when there is none this process can use.
	dir string
	// v2 is set for the unified hierarchy, where one cgroup holds every
	// controller and a process (not a thread) joins it.
	v2 bool
	// why says what is missing when dir is "".
	why string
}

// pidsRoot and memoryRoot are where sandboxes' pids and memory cgroups
// are made, found once.
var (
	pidsRoot   = sync.OnceValue(func() cgroupRoot { return findCgroupRoot("pids", "pids.max", "pids.max") })
	memoryRoot = sync.OnceValue(func() cgroupRoot {
		return findCgroupRoot("memory", "memory.limit_in_bytes", "memory.max")
	})
)

// findCgroupRoot looks for controller as cgroup v1
// (/sys/fs/cgroup/<controller>) or v2 (/sys/fs/cgroup with the controller
// in its cgroup.controllers), at this process's own cgroup, and checks
// that a child cgroup made there has the controller's file (v1File or
// v2File): under v2 the parent must have the controller in its
// cgroup.subtree_control, and this process must be allowed to make
// cgroups there (root, or a delegated cgroup).
func findCgroupRoot(controller, v1File, v2File string) cgroupRoot {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return cgroupRoot{why: "cannot read /proc/self/cgroup: " + err.Error()}
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "" && parts[0] == "0":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ","+controller+","):
			v1 = parts[2]
		}
	}
	var candidates []cgroupRoot
	if v1 != "" {
		candidates = append(candidates, cgroupRoot{dir: filepath.Join(cgroupFS, controller, v1)})
	}
	if v2 != "" {
		if b, err := os.ReadFile(filepath.Join(cgroupFS, "cgroup.controllers")); err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+controller+" ") {
			candidates = append(candidates, cgroupRoot{dir: filepath.Join(cgroupFS, v2), v2: true})
		}
	}
	if len(candidates) == 0 {
		return cgroupRoot{why: fmt.Sprintf("this host has no %s cgroup controller (v1 or v2)", controller)}
	}
	var whys []string
	for _, c := range candidates {
		// Named for the controller too: under v2 the pids and memory
		// probes may run at once in the same directory.
		probe := filepath.Join(c.dir, "berth-probe-"+controller+"-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			whys = append(whys, fmt.Sprintf("cannot make a cgroup in %s (run the daemon as root, or delegate it a cgroup): %v", c.dir, err))
			continue
		}
		file := v1File
		if c.v2 {
			file = v2File
		}
		_, statErr := os.Stat(filepath.Join(probe, file))
		_ = os.Remove(probe)
		if statErr == nil {
			return c
		}
		whys = append(whys, fmt.Sprintf("a cgroup made in %s has no %s (the %s controller is not enabled in its cgroup.subtree_control)", c.dir, file, controller))
	}
	return cgroupRoot{why: strings.Join(whys, "; ")}
}

// LimitsPids reports whether the provider enforces SandboxLimits.Pids on
// this host: it needs a pids cgroup it may create children in.
func (p *Provider) LimitsPids() bool { return pidsRoot().dir != "" }

// LimitsMemory reports whether the provider can enforce
// SandboxLimits.MemoryBytes on this host (a memory cgroup it may create
// children in): nil when it can, else EUnavailable saying why not.
func (p *Provider) LimitsMemory() error {
	if r := memoryRoot(); r.dir == "" {
		return core.Errorf(core.EUnavailable, "bwrap: a memory limit needs a memory cgroup this daemon can make, and there is none: %s", r.why)
	}
	return nil
}

var _ core.SandboxMemoryLimiter = (*Provider)(nil)

// sandboxCgroup is one sandbox's cgroups: a pids and a memory cgroup under
// v1, one cgroup with both under v2.
type sandboxCgroup struct {
	// dirs are the cgroups made, removed by remove.
	dirs []string
	// tasks are the v1 "tasks" files that the thread forking bwrap joins
	// (one thread can join alone): bwrap is born in the cgroups. leave
	// are the files of the cgroups it goes back to, in the same order.
	tasks, leave []string
	// v2Dir is the v2 cgroup bwrap is cloned into (under v2 only a whole
	// process may join, and only at clone may it do so whatever uid it
	// runs as); "" under v1.
	v2Dir string
	// pidsDir and memDir are the cgroups holding the pids and the memory
	// limit ("" without one); memV2 says which files memDir has.
	pidsDir, memDir string
	memV2           bool
}

// newCgroup makes the cgroups of a sandbox allowing at most pids
// processes and memory bytes of memory (swap included); 0 leaves that
// one out. The caller has checked that the roots exist. It takes the
// ones Prewarm made when they fit.
func newCgroup(pids, memory int64) (*sandboxCgroup, error) {
	if cg := takeWarmFor(pids > 0, memory > 0); cg != nil {
		if err := cg.limit(pids, memory); err == nil {
			return cg, nil
		}
		// Gone since it was made (removed by hand?): a new one is made.
		_ = cg.remove()
	}
	cg, err := makeCgroupDirs(pids > 0, memory > 0)
	if err != nil {
		return nil, err
	}
	if err := cg.limit(pids, memory); err != nil {
		_ = cg.remove()
		return nil, err
	}
	return cg, nil
}

// makeCgroupDirs makes a sandbox's cgroups, with no limits yet: a pids
// and a memory one as asked (v1), or the one that has both (v2).
func makeCgroupDirs(pids, memory bool) (cg *sandboxCgroup, err error) {
	cg = &sandboxCgroup{}
	defer func() {
		if err != nil {
			_ = cg.remove()
		}
	}()
	name := "berth-" + ids.New("sbx")
	// v2Dir is the one v2 cgroup, shared by both controllers.
	var v2Dir string
	dirFor := func(r cgroupRoot) (string, error) {
		if r.v2 && v2Dir != "" {
			return v2Dir, nil
		}
		dir := filepath.Join(r.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		cg.dirs = append(cg.dirs, dir)
		if r.v2 {
			v2Dir, cg.v2Dir = dir, dir
		} else {
			cg.tasks = append(cg.tasks, filepath.Join(dir, "tasks"))
			cg.leave = append(cg.leave, filepath.Join(r.dir, "tasks"))
		}
		return dir, nil
	}
	if pids {
		if cg.pidsDir, err = dirFor(pidsRoot()); err != nil {
			return cg, err
		}
	}
	if memory {
		r := memoryRoot()
		if cg.memDir, err = dirFor(r); err != nil {
			return cg, err
		}
		cg.memV2 = r.v2
	}
	return cg, nil
}

// limit writes the limits into the cgroups makeCgroupDirs made for them.
func (c *sandboxCgroup) limit(pids, memory int64) error {
	if pids > 0 {
		if err := writeCgroup(c.pidsDir, "pids.max", pids); err != nil {
			return err
		}
	}
	if memory <= 0 {
		return nil
	}
	if c.memV2 {
		if err := writeCgroup(c.memDir, "memory.max", memory); err != nil {
			return err
		}
		// Swap would let the sandbox hold more than its limit.
		if err := writeCgroup(c.memDir, "memory.swap.max", 0); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := writeCgroup(c.memDir, "memory.limit_in_bytes", memory); err != nil {
		return err
	}
	// memsw is memory plus swap; the file exists only with swap
	// accounting (without it swap is not counted, and not bounded).
	if err := writeCgroup(c.memDir, "memory.memsw.limit_in_bytes", memory); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// writeCgroup writes one number to a cgroup file.
func writeCgroup(dir, file string, v int64) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0o644)
}

// oomKills is how many processes the kernel killed in the sandbox's
// memory cgroup for want of memory so far (the oom_kill count of
// memory.events under v2, of memory.oom_control under v1); 0 without a
// memory cgroup or a kernel that does not count.
func (c *sandboxCgroup) oomKills() int64 {
	if c == nil || c.memDir == "" {
		return 0
	}
	file := "memory.oom_control"
	if c.memV2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.memDir, file))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == "oom_kill" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// removeWithin bounds how long remove waits for a cgroup to empty.
const removeWithin = 5 * time.Second

// remove deletes the cgroups once they are empty. The kernel refuses
// (EBUSY) while a process is still in one, and a killed sandbox's
// processes leave it only as they are reaped, after bwrap itself has been
// waited for: so it retries, for at most removeWithin.
func (c *sandboxCgroup) remove() error {
	var errs []error
	deadline := time.Now().Add(removeWithin)
	for _, dir := range c.dirs {
		for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
			err := os.Remove(dir)
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				if err != nil && !os.IsNotExist(err) {
					errs = append(errs, err)
				}
				break
			}
			time.Sleep(delay)
		}
	}
	return errors.Join(errs...)
}
