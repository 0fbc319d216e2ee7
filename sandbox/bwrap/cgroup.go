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

	"github.com/berth-sh/berth/internal/ids"
)

// pidsRoot is the pids-controller cgroup directory this process is in,
// where each sandbox gets a child cgroup with pids.max; "" when there is
// none this process can use (no pids controller, or no right to create
// cgroups: a non-root daemon without delegation).
var pidsRoot = sync.OnceValue(findPidsRoot)

// findPidsRoot looks for the pids controller as cgroup v1
// (/sys/fs/cgroup/pids) or v2 (/sys/fs/cgroup with pids in its
// controllers) and checks that a child cgroup can be made there.
func findPidsRoot() string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return ""
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
		case strings.Contains(","+parts[1]+",", ",pids,"):
			v1 = parts[2]
		}
	}
	var candidates []string
	if v1 != "" {
		candidates = append(candidates, filepath.Join("/sys/fs/cgroup/pids", v1))
	}
	if v2 != "" {
		if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(b)+" ", " pids") {
			candidates = append(candidates, filepath.Join("/sys/fs/cgroup", v2))
		}
	}
	for _, dir := range candidates {
		probe := filepath.Join(dir, "berth-probe-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			continue
		}
		_, statErr := os.Stat(filepath.Join(probe, "pids.max"))
		_ = os.Remove(probe)
		if statErr == nil {
			return dir
		}
	}
	return ""
}

// LimitsPids reports whether the provider enforces SandboxLimits.Pids on
// this host: it needs a pids cgroup it may create children in.
func (p *Provider) LimitsPids() bool { return pidsRoot() != "" }

// pidsCgroup is one sandbox's pids cgroup.
type pidsCgroup struct {
	dir string
	// perThread is set for cgroup v1, where one thread can join alone
	// (its "tasks" file): the thread that forks bwrap does, and bwrap is
	// born in the cgroup. Under v2 a shell joins it and execs bwrap.
	perThread bool
}

// newPidsCgroup makes a cgroup allowing at most max processes.
func newPidsCgroup(max int64) (*pidsCgroup, error) {
	root := pidsRoot()
	if root == "" {
		return nil, fmt.Errorf("no pids cgroup is available to this process")
	}
	dir := filepath.Join(root, "berth-"+ids.New("sbx"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	_, err := os.Stat(filepath.Join(dir, "tasks"))
	return &pidsCgroup{dir: dir, perThread: err == nil}, nil
}

// wrap returns argv run so that the process joins the cgroup before it
// execs argv: everything it starts is counted, with no window to escape.
// Only for cgroup v2 (see perThread).
func (c *pidsCgroup) wrap(argv []string) []string {
	script := `echo $$ > "$0" && exec "$@"`
	return append([]string{"/bin/sh", "-c", script, filepath.Join(c.dir, "cgroup.procs")}, argv...)
}

// removeWithin bounds how long remove waits for the cgroup to empty.
const removeWithin = 5 * time.Second

// remove deletes the cgroup once it is empty. The kernel refuses (EBUSY)
// while a process is still in it, and a killed sandbox's processes leave
// it only as they are reaped, after bwrap itself has been waited for: so
// it retries, for at most removeWithin.
func (c *pidsCgroup) remove() error {
	deadline := time.Now().Add(removeWithin)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := os.Remove(c.dir)
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}
