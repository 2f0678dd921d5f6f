// Package relay joins the pod networks of many processes into one: the shards of a group
// (package shards) each hold the addresses of their own nodes and pods, and a connection or an
// ICMP echo from a pod on one shard to an address another shard holds travels between the two
// shards over a TCP connection of the real network, from the dialling process's Client to the
// holder's Server, which hands it to its pod network (package network) as if it had been dialled
// there.
//
// It owns the wire between shards: a request line naming the source node and addresses and the
// destination, an answer line, then the connection's bytes both ways, half-closes included. It
// must not decide where an address lives (the Client's Locate says) nor whether two nodes reach
// each other (each end's network decides for its own node: the dialler's before it asks, the
// holder's before it answers), so that a node partitioned on its shard is cut off from every
// shard.
package relay
