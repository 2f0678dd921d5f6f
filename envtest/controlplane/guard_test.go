//go:build linux

package controlplane

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restartbed/restartbed/internal/procfs"
)

// A binary started through the guard dies when the process that started it dies, without
// anyone stopping it: this is what keeps a killed test run from leaking a control plane.
func TestGuardKillsTheBinaryWhenItsParentDies(t *testing.T) {
	cache := t.TempDir()
	opts := Options{Progress: &syncBuffer{}, CacheDir: cache}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	guard, err := ensureGuard(opts)
	if err != nil {
		t.Fatalf("building the guard: %v", err)
	}
	realDir := filepath.Join(cache, "real")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range Binaries {
		// Stands in for the real binary: it runs until it is killed.
		if err := os.WriteFile(filepath.Join(realDir, name), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	assets := Assets{Dir: realDir, Guard: guard}
	paths, err := assets.Guarded(filepath.Join(cache, "guarded"))
	if err != nil {
		t.Fatal(err)
	}
	etcd := paths[EtcdBinary]

	// The parent starts the guarded binary, prints its pid, lives a moment and exits.
	parent := exec.Command("sh", "-c", `"$0" & echo $!; read _ || true`, etcd)
	stdin, err := parent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// While the parent lives, the binary runs (as sleep, after the guard replaced itself).
	waitFor(t, "the guarded binary to run as sleep", func() bool { return procfs.Command(pid) == "sleep" })

	stdin.Close() // the parent's read returns and it exits
	if err := parent.Wait(); err != nil {
		t.Fatalf("parent: %v", err)
	}
	waitFor(t, "the guarded binary to die with its parent", func() bool { return !procfs.Alive(pid) })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
