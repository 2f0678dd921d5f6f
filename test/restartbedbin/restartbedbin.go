// Package restartbedbin builds cmd/restartbed for the tests that run it as a process — the CLI's
// tests, and the scenarios and clusters whose nodes run in `restartbed kubelet` processes. It
// builds the binary once per test binary and removes it when asked; it runs nothing itself.
package restartbedbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	mu  sync.Mutex
	dir string
)

var build = sync.OnceValues(func() (string, error) {
	d, err := os.MkdirTemp("", "restartbed-bin-")
	if err != nil {
		return "", err
	}
	mu.Lock()
	dir = d
	mu.Unlock()
	path := filepath.Join(d, "restartbed")
	if out, err := exec.Command("go", "build", "-o", path, "github.com/restartbed/restartbed/cmd/restartbed").CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	return path, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// Path builds cmd/restartbed, once for the whole test binary, and returns its path; a failed
// build fails t.
func Path(t testing.TB) string {
	t.Helper()
	path, err := build()
	if err != nil {
		t.Fatalf("building restartbed: %v", err)
	}
	return path
}

// Remove removes the built binary; TestMain calls it after the tests.
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir) // best effort: the temporary directory is the system's to clean too
	}
}
