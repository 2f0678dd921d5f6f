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
	// userController: the fault acts on the caller's controller (envtest.UserController), which
	// only --controller runs; restartbed's JobSet controller does not run then.
	userController bool
}

// Timing of the faults that heal: long enough for the cluster to notice (a kubelet's status
// goes stale, a watch breaks), short enough that the fast profile's node monitor does not evict.
const (
	partitionFor = 5 * time.Second
	downFor      = 3 * time.Second
	throttleFor  = 3 * time.Second
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

// The throttle faults make the apiserver refuse a group's writes as API Priority and Fairness
// refuses a priority level that has no seat left: 429 Too Many Requests with Retry-After, which
// client-go retries after the delay (ten times, then the request fails). A FlowSchema sends the
// group's writes to a priority level with no seats, no borrowing and no queue; deleting both ends
// it. The steps are plain apply and delete steps, so a written scenario shows how it is done.
var throttled = []struct{ name, group, whose string }{
	{"pods", "system:serviceaccounts", "the pods' service accounts (the agents' attempt patches)"},
	{"kubelets", "system:nodes", "the kubelets (pod and node status, Leases, events)"},
}

func init() {
	for _, t := range throttled {
		name := "restartbed-throttle-" + t.name
		plc := map[string]any{
			"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"type": "Limited", "limited": map[string]any{
				"nominalConcurrencyShares": 0, "lendablePercent": 0, "borrowingLimitPercent": 0,
				"limitResponse": map[string]any{"type": "Reject"},
			}},
		}
		fs := map[string]any{
			"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"priorityLevelConfiguration": map[string]any{"name": name},
				// Before every suggested and mandatory schema but exempt (1), which only
				// system:masters matches.
				"matchingPrecedence":  2,
				"distinguisherMethod": map[string]any{"type": "ByUser"},
				"rules": []any{map[string]any{
					"subjects": []any{map[string]any{"kind": "Group", "group": map[string]any{"name": t.group}}},
					"resourceRules": []any{map[string]any{
						"verbs": []any{"create", "update", "patch", "delete", "deletecollection"}, "apiGroups": []any{"*"},
						"resources": []any{"*"}, "namespaces": []any{"*"}, "clusterScope": true,
					}},
				}},
			},
		}
		del := func(kind string) map[string]any {
			return map[string]any{"delete": map[string]any{"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": kind, "name": name}}
		}
		Faults = append(Faults, Fault{Name: "throttle-" + t.name,
			Does: fmt.Sprintf("for %s the apiserver refuses every write of %s with 429 and Retry-After, as API Priority and Fairness does; client-go retries", throttleFor, t.whose),
			steps: func(*PodTarget) []map[string]any {
				return []map[string]any{
					{"apply": []any{map[string]any{"inline": plc}, map[string]any{"inline": fs}}},
					{"sleep": throttleFor.String()},
					del("FlowSchema"), del("PriorityLevelConfiguration"),
				}
			}})
	}
	Faults = append(Faults, Fault{Name: "reset-connections",
		Does: "every pod's open connections to the apiserver are reset at once, on every node: every agent's watch breaks and watches again",
		steps: func(*PodTarget) []map[string]any {
			return []map[string]any{{"resetConnections": map[string]any{}}}
		}})
}

// The component faults kill one control-plane process, restartbed's JobSet controller or the
// caller's controller, and start it again with its data kept.
func init() {
	for _, c := range []struct{ name, short string }{
		{"kube-apiserver", "apiserver"}, {"etcd", "etcd"}, {"kube-controller-manager", "controller-manager"}, {"kube-scheduler", "scheduler"},
		{envtest.JobSetController, "jobset-controller"}, {envtest.UserController, "controller"},
	} {
		f := Fault{Name: "restart-" + c.short,
			Does: fmt.Sprintf("%s is killed (SIGKILL) and started again %s later, its data kept", c.name, downFor),
			steps: func(*PodTarget) []map[string]any {
				target := map[string]any{"component": c.name}
				return []map[string]any{{"killComponent": target}, {"sleep": downFor.String()}, {"startComponent": target}}
			}}
		if c.name == envtest.UserController {
			f.userController = true
			f.Does = fmt.Sprintf("with --controller: your controller's process group is killed (SIGKILL) and its command started again %s later", downFor)
		}
		Faults = append(Faults, f)
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

// DefaultFaults are the kinds explore injects when none are named: with the caller's controller
// (userController), restart-controller in place of restart-jobset-controller.
func DefaultFaults(userController bool) []string {
	var names []string
	for _, f := range Faults {
		switch {
		case f.userController && !userController, userController && f.Name == "restart-jobset-controller":
		default:
			names = append(names, f.Name)
		}
	}
	return names
}

// FaultsNamed returns the kinds named, or DefaultFaults(false) for none.
func FaultsNamed(names []string) ([]Fault, error) {
	if len(names) == 0 {
		names = DefaultFaults(false)
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
