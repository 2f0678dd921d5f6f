package envtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// A cluster's files (etcd's data, the apiserver's certificates, kubeconfigs) live in one
// directory of the temp directory, named workDirPattern, holding an exclusive flock on its
// workDirLock for as long as the cluster runs. The kernel drops the lock when the process dies,
// however it dies, so the next cluster to start can tell an abandoned directory from a live one
// and remove it: a killed run leaves nothing behind for longer than that.
const (
	workDirPattern = "restartbed-cluster-*"
	workDirLock    = "owner.lock"
	// workDirLockless is how old a directory without a lock file must be before it counts as
	// abandoned; a younger one may be in the instant between its creation and its lock.
	workDirLockless = time.Minute
)

// workDir is a cluster's directory and the lock that says it is in use.
type workDir struct {
	path string
	lock *os.File
}

// newWorkDir sweeps abandoned directories, then creates and locks a new one.
func newWorkDir(clk clock.PassiveClock) (*workDir, error) {
	sweepWorkDirs(os.TempDir(), clk)
	path, err := os.MkdirTemp("", workDirPattern)
	if err != nil {
		return nil, fmt.Errorf("creating the control plane's directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(path, workDirLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		_ = os.RemoveAll(path) // best effort: the next cluster removes what is left
		return nil, fmt.Errorf("locking the control plane's directory: %w", err)
	}
	return &workDir{path: path, lock: f}, nil
}

// file is the path of name inside the directory.
func (w *workDir) file(name string) string { return filepath.Join(w.path, name) }

// remove deletes the directory, then lets go of the lock.
func (w *workDir) remove() error {
	err := os.RemoveAll(w.path)
	return errors.Join(err, w.lock.Close())
}

// sweepWorkDirs removes the directories of clusters whose process has died. It never fails: a
// directory it cannot judge or remove is left for a later sweep.
func sweepWorkDirs(tmp string, clk clock.PassiveClock) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, workDirPattern)) // only a malformed pattern fails, and this one is constant
	for _, dir := range dirs {
		if abandoned(dir, clk) {
			_ = os.RemoveAll(dir) // best effort: another cluster's start tries again
		}
	}
}

// abandoned reports whether no live process holds dir's lock.
func abandoned(dir string, clk clock.PassiveClock) bool {
	f, err := os.Open(filepath.Join(dir, workDirLock))
	if err != nil {
		fi, serr := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist) && serr == nil && fi.IsDir() && clk.Since(fi.ModTime()) > workDirLockless
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false // held: its cluster runs
	}
	return true
}
