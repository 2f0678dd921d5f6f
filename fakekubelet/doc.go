// Package fakekubelet emulates the kubelets of a cluster in one process, against a real
// apiserver: it registers nodes and keeps their Leases and status fresh, and runs the pods the
// scheduler binds to them as the kubelet of the cluster's release does (docs/fakekubelet.md).
//
// One Kubelet serves every node: it holds one pod informer and one node informer and a bounded
// set of workers, never a goroutine or a watch per node, so thousands of nodes fit in a process.
// Its nodes' kubelet API is served on their pod-network addresses and, for a kubelet joined to
// another cluster (package join), on real listeners.
// It talks only to the apiserver; it never calls a controller, and nothing a pod spec says
// reaches the host.
//
// This package holds the pod workers that apply each sync's plan (pods.go), what a probe
// result changes at once and the lifecycle hooks (probes.go), the pods' view of a partition (partition.go), the existing
// nodes it takes over as KWOK's controller does (adopt.go), what containers read from the API — ConfigMaps, Secrets, Services, tokens — (sources.go), events and
// fault injection. What can be decided or run on its own lives in subpackages, each importing
// only those listed before it: container (snapshots of a pod's containers), pleg (the relist
// of the runtime, which the pod workers see instead of the runtime itself), token (the
// service-account token cache), release (what each release does differently), restart (restart
// rules, phase), status (status generation and publication), podactions (the plan of one sync),
// prober (the probe workers, one per probe, and their results);
// vfs, logs, shell, program, hostproc (host binaries, in namespaces of their own) and runtime run
// the containers; server is the kubelet API the nodes serve (api.go puts it on their addresses);
// nodes registers the nodes, keeps their Leases and status, and partitions them.
package fakekubelet
