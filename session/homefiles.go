package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tokenFiles are the names under which agents keep a login's tokens
// (Gemini CLI's and Qwen Code's oauth_creds.json, their accounts): a copy
// of a whole directory leaves them out, as the agent calls the model
// gateway with a key worth nothing outside berth (docs/api.md, The model
// gateway). A home_files entry that names such a file itself is copied.
var tokenFiles = map[string]bool{"oauth_creds.json": true, "google_accounts.json": true, ".credentials.json": true, "auth.json": true}

// maxHomeFilesBytes bounds what one start copies of an agent's home_files
// (a config directory can hold an agent's whole history); files past it
// are left out, and said so in the daemon's log.
const maxHomeFilesBytes = 64 << 20

// copyHomeFiles copies the agent's home_files — the user's credentials and
// config, a file or a directory each — from the user's home into the
// session's private home, where the agent may change them: they are the
// session's copies, never written back. Each start copies them afresh
// (the user's current credentials win); what else the agent keeps in its
// home stays.
//
// The session's home is the agent's to change between starts, so every
// write goes through an os.Root of it: a link the agent left there never
// leads a copy outside, and a file it left in the way is replaced, not
// written through. On the user's side a home_files entry that is a link
// is followed (dotfile managers link them), links inside a directory are
// not copied, nor anything but plain files and directories.
func (pl *placement) copyHomeFiles(files []string, home string) error {
	if pl.m.opts.UserHome == "" || len(files) == 0 || home == "" {
		return nil
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return fmt.Errorf("open the session's home: %w", err)
	}
	defer root.Close()
	c := homeCopier{root: root, budget: maxHomeFilesBytes}
	for _, f := range files {
		rel := filepath.Clean(strings.TrimSuffix(f, "/"))
		if filepath.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		src, err := filepath.EvalSymlinks(filepath.Join(pl.m.opts.UserHome, rel))
		if err != nil {
			continue
		}
		c.copyTree(src, rel)
	}
	return errors.Join(c.errs...)
}

// homeCopier copies files into a session's home under a byte budget.
type homeCopier struct {
	root   *os.Root
	budget int64
	errs   []error
	// walked, when set, is told of each regular file between the walk's
	// look at it and its open (tests swap it then).
	walked func(p string)
}

// copyTree copies the file or directory src to rel inside the root. A
// directory is read through an os.Root of it, so that nothing swapped in
// during the walk (a directory for a link) leads a read out of it; every
// file is opened without following a final link or waiting on a FIFO,
// and only a regular file is copied.
func (c *homeCopier) copyTree(src, rel string) {
	fi, err := os.Lstat(src)
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	if !fi.IsDir() {
		if fi.Mode().IsRegular() {
			c.copyFile(nil, src, rel)
		}
		return
	}
	from, err := os.OpenRoot(src)
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	defer from.Close()
	_ = fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			c.errs = append(c.errs, err)
			return nil
		}
		dst := filepath.Join(rel, filepath.FromSlash(p))
		switch {
		case d.IsDir():
			if err := c.dir(dst); err != nil {
				c.errs = append(c.errs, err)
				return fs.SkipDir
			}
		case d.Type().IsRegular() && !tokenFiles[d.Name()]:
			c.copyFile(from, p, dst)
		}
		return nil
	})
}

// copyFile copies the regular file p (in from; a host path when from is
// nil) to dst, recording a failure.
func (c *homeCopier) copyFile(from *os.Root, p, dst string) {
	if c.walked != nil {
		c.walked(p)
	}
	const flags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	var in *os.File
	var err error
	if from != nil {
		in, err = from.OpenFile(p, flags, 0)
	} else {
		in, err = os.OpenFile(p, flags, 0)
	}
	if err == nil {
		defer in.Close()
		err = c.file(in, dst)
	}
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// dir makes the directory dst (and its parents), replacing a non-directory
// in its place.
func (c *homeCopier) dir(dst string) error {
	if fi, err := c.root.Lstat(dst); err == nil && !fi.IsDir() {
		if err := c.root.RemoveAll(dst); err != nil {
			return err
		}
	}
	return c.root.MkdirAll(dst, 0o700)
}

// file copies the open file in to dst, owner-only, as a new file (never
// through whatever was at dst); anything but a regular file is left out.
func (c *homeCopier) file(in *os.File, dst string) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s left out: not a regular file", dst)
	}
	if fi.Size() > c.budget {
		return fmt.Errorf("%s left out: home_files copies are bounded to %d bytes", dst, maxHomeFilesBytes)
	}
	if err := c.dir(filepath.Dir(dst)); err != nil {
		return err
	}
	if err := c.root.RemoveAll(dst); err != nil {
		return err
	}
	out, err := c.root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()&0o700|0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, c.budget))
	c.budget -= n
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
