package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// covers are the host directories bound read-only over hidden directories
// that other mounts of the sandbox lie inside (a session home inside the
// daemon's home inside the workspace), by the hidden path inside the
// container. Elsewhere an empty tmpfs covers a hidden directory; here it
// cannot: runc gives a tmpfs the mode of the directory it covers (the
// daemon's home is 0700 root's), so the sandbox's user could not cross
// it to the mount inside. A cover holds only the directories leading to
// those mounts, 0711 and root's: crossable, not listable, not writable.
type covers struct {
	dir   string
	paths map[string]string
}

// makeCovers makes the covers cfg needs; nil when it needs none.
func makeCovers(cfg berth.SandboxConfig) (*covers, error) {
	var targets []berth.Bind
	if cfg.Home != "" {
		targets = append(targets, berth.Bind{Source: cfg.Home, Target: cfg.Home})
	}
	targets = append(targets, cfg.Binds...)
	var c *covers
	for _, m := range boxutil.Masks(cfg) {
		if !m.Dir {
			continue
		}
		for _, b := range targets {
			rel, err := filepath.Rel(m.Path, filepath.Clean(b.Target))
			if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			if c == nil {
				dir, err := os.MkdirTemp("", "berth-docker-cover-")
				if err != nil {
					return nil, err
				}
				c = &covers{dir: dir, paths: map[string]string{}}
			}
			if err := c.add(m.Path, rel, b.Source); err != nil {
				_ = c.remove()
				return nil, err
			}
		}
	}
	return c, nil
}

// add makes, in hidden's cover, the directories leading to rel and rel's
// mount point (a directory or a file, as src is).
func (c *covers) add(hidden, rel, src string) error {
	host, ok := c.paths[hidden]
	if !ok {
		host = filepath.Join(c.dir, strconv.Itoa(len(c.paths)))
		if err := os.Mkdir(host, 0o711); err != nil {
			return err
		}
		c.paths[hidden] = host
	}
	parts := strings.Split(rel, "/")
	p := host
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o711); err != nil && !os.IsExist(err) {
			return err
		}
	}
	p = filepath.Join(p, parts[len(parts)-1])
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.Mkdir(p, 0o711)
	} else {
		err = os.WriteFile(p, nil, 0o600)
	}
	if err != nil && !os.IsExist(err) {
		return err
	}
	// Mkdir's modes pass through the umask.
	return filepath.Walk(host, func(path string, info os.FileInfo, err error) error {
		if err != nil || !info.IsDir() {
			return err
		}
		return os.Chmod(path, 0o711)
	})
}

// path is the cover of the hidden directory at hidden, if it has one.
func (c *covers) path(hidden string) (string, bool) {
	if c == nil {
		return "", false
	}
	p, ok := c.paths[hidden]
	return p, ok
}

// remove deletes the covers from the host.
func (c *covers) remove() error {
	if c == nil {
		return nil
	}
	return os.RemoveAll(c.dir)
}
