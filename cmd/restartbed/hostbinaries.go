package main

import (
	"fmt"
	"path/filepath"

	"github.com/restartbed/restartbed/fakekubelet/hostproc"
)

// hostBinaryFlag checks a flag that names a host executable to run as containers' processes: the
// run must allow host binaries (--allow-host-binaries), the file must be an executable, and this
// host able to run it. It returns the absolute path.
func hostBinaryFlag(flag, path string, allowed bool) (string, error) {
	if !allowed {
		return "", fmt.Errorf("%s names the host binary %s, and --allow-host-binaries was not given; nothing was started", flag, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	if err := hostproc.CheckBinary(abs); err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	if err := hostproc.Check(); err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	return abs, nil
}
