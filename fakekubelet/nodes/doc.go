// Package nodes owns the emulated kubelet's nodes: their identity (name, addresses, pod range),
// their registration, the heartbeat that renews their Leases and re-posts their status, and
// their partitions from the apiserver (the network a partitioned node's programs see).
//
// The pod workers ask a Node whether it is cut off and for its addresses; they never reach into
// it. This package never reads or writes pods.
package nodes
