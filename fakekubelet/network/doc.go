// Package network is the pod network the emulated nodes share: what CNI, kube-proxy and CoreDNS
// give a real cluster's pods. Each pod sandbox and each node has an address on it; programs
// listen on ports and dial addresses over in-memory connections; ICMP echo reaches an address
// that is up; a Service's cluster IP is routed to one of its ready endpoints, as kube-proxy
// routes it; and the cluster DNS server answers names the way CoreDNS's kubernetes plugin does,
// from the Services and EndpointSlices the control plane keeps. It also composes what the kubelet
// writes into every container for names: /etc/hosts, /etc/resolv.conf and the hostname.
//
// Nothing leaves the process but through Options.Elsewhere, the way to the addresses another
// process holds (a shard's, package relay): the network opens no host socket itself, and names
// outside the cluster domain do not resolve. The network decides nothing about pods: the runtime attaches a sandbox's address
// when it creates the sandbox and detaches it when the sandbox stops; a partition between nodes
// is the caller's to say (Options.Reachable).
package network
