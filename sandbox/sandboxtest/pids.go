package sandboxtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the host mounts its cgroups; v1 controllers each
// have a directory under it.
const cgroupRoot = "/sys/fs/cgroup"

// ForkLoop is a sh script that forks processes that sleep until the pids
// limit refuses more, and keeps trying as a real fork bomb does: busybox
// sh exits on its first "can't fork", so an outer loop runs the forking
// shell again each time it dies (the outer always gets back the slot the
// dead one freed). It never ends; it prints "started" first. sh is the
// shell's path inside the sandbox, run also for the inner shell and the
// sleeps (a multi-call busybox).
func ForkLoop(sh string) string {
	return fmt.Sprintf(`echo started
while :; do %[1]s sh -c 'while :; do %[1]s sleep 1000 & done' 2>/dev/null; done`, quote(sh))
}

// PidsCounts is what the kernel counted in a pids cgroup (v1 or v2).
type PidsCounts struct {
	// Dir is the cgroup's directory.
	Dir string
	// Max is pids.max; -1 for "max".
	Max int64
	// Current is pids.current: the processes in it now.
	Current int64
	// Peak is pids.peak, the most processes it held at once; -1 when the
	// kernel has no such file.
	Peak int64
	// Refused is the "max" count of pids.events: forks the limit refused.
	Refused int64
}

// ReadPids reads the counters of the pids cgroup at dir.
func ReadPids(dir string) (PidsCounts, error) {
	c := PidsCounts{Dir: dir, Peak: -1}
	var err error
	if c.Max, err = readPidsValue(filepath.Join(dir, "pids.max")); err != nil {
		return c, err
	}
	if c.Current, err = readPidsValue(filepath.Join(dir, "pids.current")); err != nil {
		return c, err
	}
	if peak, err := readPidsValue(filepath.Join(dir, "pids.peak")); err == nil {
		c.Peak = peak
	} else if !os.IsNotExist(err) {
		return c, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids.events"))
	if err != nil {
		return c, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "max" {
			if c.Refused, err = strconv.ParseInt(v, 10, 64); err != nil {
				return c, fmt.Errorf("%s: %w", filepath.Join(dir, "pids.events"), err)
			}
		}
	}
	return c, nil
}

// readPidsValue reads a pids.* file holding one number, or "max" (-1).
func readPidsValue(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// PidsCgroupOf returns the directory of host process pid's own pids
// cgroup: the v1 pids hierarchy's when there is one, else the v2 one's.
func PidsCgroupOf(pid int) (string, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "cgroup")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var v2 string
	for line := range strings.Lines(string(b)) {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if strings.Contains(","+parts[1]+",", ",pids,") {
			return filepath.Join(cgroupRoot, "pids", parts[2]), nil
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = filepath.Join(cgroupRoot, parts[2])
		}
	}
	if v2 == "" {
		return "", fmt.Errorf("%s names no pids cgroup", path)
	}
	return v2, nil
}

// LimitingPidsCgroup returns the pids cgroup that limits host process
// pid: its own or the nearest ancestor whose pids.max is not "max".
func LimitingPidsCgroup(pid int) (string, error) {
	dir, err := PidsCgroupOf(pid)
	if err != nil {
		return "", err
	}
	for d := dir; strings.HasPrefix(d, cgroupRoot+"/"); d = filepath.Dir(d) {
		max, err := readPidsValue(filepath.Join(d, "pids.max"))
		if os.IsNotExist(err) {
			// The root cgroup has no pids.max: nothing limits pid.
			break
		}
		if err != nil {
			return "", err
		}
		if max >= 0 {
			return d, nil
		}
	}
	return "", fmt.Errorf("no pids cgroup limits process %d (its own is %s)", pid, dir)
}

// within reports whether cgroup directory dir is root or under it.
func within(dir, root string) bool {
	return dir == root || strings.HasPrefix(dir, root+"/")
}
