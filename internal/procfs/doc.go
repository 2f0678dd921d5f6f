//go:build linux

// Package procfs reads process state from Linux's /proc: which processes a control plane left
// running (for tests) and how much memory a process held at its peak (for restartbed bench). It
// only reads; it never signals a process.
package procfs
