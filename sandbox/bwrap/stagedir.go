package bwrap

import (
	"os"
	"path/filepath"
	"strconv"
)

// stageDir is a stage's directory: crossable, not listable, by the host
// uid's bwrap, which only passes through it to the entries bound in it.
// Entries may be made ahead (a shim waiting for its job makes them:
// each is a metadata write, 0.1 ms or more on a journaled disk, that a
// root daemon's bwrap create paid on its path).
type stageDir struct {
	path string
	// spareDirs and spareFiles are entries made ahead, not taken yet.
	spareDirs, spareFiles []string
	// made counts the entries made: the next one's name.
	made int
}

// stageEntriesAhead are how many entries of each kind a stage made ahead
// holds: directories for the workspace, the home, /etc's view and the
// berth tools' directory, with two to spare; files for the agent's
// program and a bound file or two.
const (
	stageDirsAhead  = 6
	stageFilesAhead = 3
)

// newStageDir makes a stage directory under the temporary directory with
// dirs directory entries and files file entries ready.
func newStageDir(dirs, files int) (*stageDir, error) {
	path, err := os.MkdirTemp("", "berth-bwrap-stage-")
	if err != nil {
		return nil, err
	}
	sd := &stageDir{path: path}
	err = os.Chmod(path, 0o711)
	for i := 0; err == nil && i < dirs+files; i++ {
		var entry string
		if entry, err = sd.make(i < dirs); err == nil && i < dirs {
			sd.spareDirs = append(sd.spareDirs, entry)
		} else if err == nil {
			sd.spareFiles = append(sd.spareFiles, entry)
		}
	}
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, err
	}
	return sd, nil
}

// entry returns an empty entry to bind a directory (dir) or a file onto:
// one made ahead, or a new one.
func (sd *stageDir) entry(dir bool) (string, error) {
	spare := &sd.spareFiles
	if dir {
		spare = &sd.spareDirs
	}
	if len(*spare) > 0 {
		e := (*spare)[0]
		*spare = (*spare)[1:]
		return e, nil
	}
	return sd.make(dir)
}

// make makes the next entry, a directory (dir) or an empty file, only
// the daemon's user may open.
func (sd *stageDir) make(dir bool) (string, error) {
	entry := filepath.Join(sd.path, strconv.Itoa(sd.made))
	sd.made++
	if dir {
		return entry, os.Mkdir(entry, 0o700)
	}
	return entry, os.WriteFile(entry, nil, 0o600)
}
