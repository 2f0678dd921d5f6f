// Package bench measures restartbed at the seeds' scale (restartbed bench): in one process, on
// the embedded control plane, the control plane's write bound (pod creates and pod status
// patches per second at restartbed's own client concurrency), then a JobSet of N one-pod-per-node
// workers restarting its group, in place and by recreating its Jobs, with the time from one
// worker's exit to every worker running again, where that time goes, the API writes it took
// (counted by the apiserver itself), the 429s API Priority and Fairness answered, what the agents
// lost to them, and the peak memory of restartbed, kube-apiserver and etcd.
//
// It owns the benchmark's JobSet, its measurements and its report (table, JSON, comparison with
// an earlier JSON report). It asserts nothing about speed: goals live in docs/performance.md.
package bench
