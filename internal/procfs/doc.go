//go:build linux

// Package procfs reads process state from Linux's /proc, so that tests can prove which
// processes a control plane left running. It only reads; it never signals a process.
package procfs
