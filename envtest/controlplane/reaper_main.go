//go:build ignore

// The guard is a tiny program that stands in for kube-apiserver and etcd. It asks the kernel to
// kill it when its parent dies (PR_SET_PDEATHSIG), then replaces itself with the real binary,
// which keeps that setting. So a control plane never outlives the test binary that started it,
// even when that binary panics, times out or is killed. It is built by the controlplane package
// from this file (the build tag keeps it out of the package itself).
//
// It is invoked through a symlink NAME in a directory that also holds .real/NAME, the binary to
// run; its arguments and environment pass through unchanged.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func main() {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "restartbed guard: prctl(PR_SET_PDEATHSIG): %v\n", errno)
		os.Exit(1)
	}
	// The parent may have died before the kernel knew whom to tell: then we are orphaned already.
	if parent == 1 || os.Getppid() != parent {
		os.Exit(1)
	}
	target := filepath.Join(filepath.Dir(os.Args[0]), ".real", filepath.Base(os.Args[0]))
	if err := syscall.Exec(target, os.Args, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "restartbed guard: exec %s: %v\n", target, err)
		os.Exit(1)
	}
}
