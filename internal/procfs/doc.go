//go:build linux

// Package procfs reads process state from Linux's /proc: which processes a control plane left
// running (for tests), which child is a cluster's etcd or kube-apiserver (for the faults that kill
// them), and the CPU time and peak memory a process used (for restartbed bench),
// in the few calls its users need. github.com/prometheus/procfs parses the files; this package
// only picks and converts. It only reads; it never signals a process.
package procfs
