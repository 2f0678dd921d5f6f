package explore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/restartbed/restartbed/envtest"
)

// Fault is one kind of fault explore injects at a point.
type Fault struct {
	Name string
	// Does says what it does to the cluster (docs/explore.md, --help).
	Does string
	// steps are the trigger's steps at a point whose pod is t; nil when the fault cannot act there.
	steps func(t *PodTarget) []map[string]any
}

// Timing of the faults that heal: long enough for the cluster to notice (a kubelet's status
// goes stale, a watch breaks), short enough that the fast profile's node monitor does not evict.
const (
	partitionFor = 5 * time.Second
	downFor      = 3 * time.Second
)

// Faults are the kinds of fault, in the order schedules try them at each point.
var Faults = []Fault{
	{Name: "exit-worker", Does: "the point's worker container exits with code 1, as a crash does",
		steps: func(t *PodTarget) []map[string]any {
			if t == nil || t.Worker == "" {
				return nil
			}
			return []map[string]any{{"exitContainer": map[string]any{"pod": podRef(t), "container": t.Worker, "exitCode": 1}}}
		}},
	{Name: "exit-agent", Does: "the point's pod's agent (its first sidecar) exits with code 1",
		steps: func(t *PodTarget) []map[string]any {
			if t == nil || t.Agent == "" {
				return nil
			}
			return []map[string]any{{"exitContainer": map[string]any{"pod": podRef(t), "container": t.Agent, "exitCode": 1}}}
		}},
	{Name: "partition", Does: fmt.Sprintf("the point's pod's node is cut off from the cluster for %s, then heals", partitionFor),
		steps: func(t *PodTarget) []map[string]any {
			if t == nil {
				return nil
			}
			node := map[string]any{"nodeOf": podRef(t)}
			return []map[string]any{{"failNode": node}, {"sleep": partitionFor.String()}, {"recoverNode": node}}
		}},
	{Name: "lose-node", Does: "the point's pod's node is cut off for good: NotReady, tainted, its pods evicted after their tolerations",
		steps: func(t *PodTarget) []map[string]any {
			if t == nil {
				return nil
			}
			return []map[string]any{{"failNode": map[string]any{"nodeOf": podRef(t)}}}
		}},
	{Name: "restart-kubelet", Does: "the point's pod's kubelet restarts, its containers kept (the kubelet's restart path)",
		steps: func(t *PodTarget) []map[string]any {
			if t == nil {
				return nil
			}
			return []map[string]any{{"restartKubelet": map[string]any{"nodeOf": podRef(t)}}}
		}},
}

// The component faults kill one control-plane process, or restartbed's JobSet controller, and
// start it again with its data kept.
func init() {
	for _, c := range []struct{ name, short string }{
		{"kube-apiserver", "apiserver"}, {"etcd", "etcd"}, {"kube-controller-manager", "controller-manager"}, {"kube-scheduler", "scheduler"},
		{envtest.JobSetController, "jobset-controller"},
	} {
		Faults = append(Faults, Fault{Name: "restart-" + c.short,
			Does: fmt.Sprintf("%s is killed (SIGKILL) and started again %s later, its data kept", c.name, downFor),
			steps: func(*PodTarget) []map[string]any {
				target := map[string]any{"component": c.name}
				return []map[string]any{{"killComponent": target}, {"sleep": downFor.String()}, {"startComponent": target}}
			}})
	}
}

// FaultNames are the kinds' names, for --faults.
func FaultNames() []string {
	names := make([]string, len(Faults))
	for i, f := range Faults {
		names[i] = f.Name
	}
	return names
}

// FaultsNamed returns the kinds named, or all of them for none.
func FaultsNamed(names []string) ([]Fault, error) {
	if len(names) == 0 {
		return Faults, nil
	}
	var out []Fault
	for _, n := range names {
		i := slices.IndexFunc(Faults, func(f Fault) bool { return f.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown fault %q: the faults are %s", n, strings.Join(FaultNames(), ", "))
		}
		out = append(out, Faults[i])
	}
	return out, nil
}

func podRef(t *PodTarget) map[string]any { return map[string]any{"selector": t.Selector, "index": 0} }
