package fakekubelet

import (
	"fmt"
	"github.com/go-logr/logr"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Reasons a node does not fit a pod, in kube-scheduler's words (the filter plugins' messages),
// so that an Unschedulable condition reads as it would on a cluster.
const (
	reasonUnschedulable    = "node(s) were unschedulable"
	reasonNodeName         = "node(s) didn't match the requested node name"
	reasonUntoleratedTaint = "node(s) had untolerated taint(s)"
	reasonAffinity         = "node(s) didn't match Pod's node affinity/selector"
	reasonTooManyPods      = "Too many pods"
	reasonInsufficient     = "Insufficient %v"
	reasonDeclaredFeatures = "node declared features check failed - unsatisfied requirements: %s"
)

// nodeUsage is what the pods bound to a node already request.
type nodeUsage struct {
	pods     int64
	requests corev1.ResourceList
}

func (u *nodeUsage) add(pod *corev1.Pod) { u.addRequests(podRequests(pod)) }

// addRequests counts one more pod with these requests.
func (u *nodeUsage) addRequests(requests corev1.ResourceList) {
	u.pods++
	if u.requests == nil {
		u.requests = corev1.ResourceList{}
	}
	for name, q := range requests {
		sum := u.requests[name]
		sum.Add(q)
		u.requests[name] = sum
	}
}

// fitChecker decides whether a pod fits a node, as the default scheduler's filter plugins do for
// the features restartbed models: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity
// (node selector and required affinity), NodeResourcesFit (extended resources included) and
// NodeDeclaredFeatures. Like the scheduler, it stops at the first plugin that rejects a node.
type fitChecker struct {
	features *nodedeclaredfeatures.Framework
}

// fit returns why the node does not fit the pod, or nothing if it does.
func (f *fitChecker) fit(pod *corev1.Pod, node *corev1.Node, used nodeUsage) []string {
	return f.fitRequests(pod, podRequests(pod), node, used)
}

// podRequests is what the scheduler counts a pod as requesting.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// fitRequests is fit with the pod's requests computed once by the caller, who checks many nodes.
func (f *fitChecker) fitRequests(pod *corev1.Pod, requests corev1.ResourceList, node *corev1.Node, used nodeUsage) []string {
	if node.Spec.Unschedulable && !toleratesUnschedulable(pod) {
		return []string{reasonUnschedulable}
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return []string{reasonNodeName}
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations, scheduleBlocking, false); untolerated {
		return []string{reasonUntoleratedTaint}
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return []string{reasonAffinity}
	}
	if reasons := resourceMisfit(requests, node, used); len(reasons) > 0 {
		return reasons
	}
	if f.features != nil {
		need, err := f.features.InferForPodScheduling(&nodedeclaredfeatures.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, kubeletVersion)
		if err == nil && need.Len() > 0 {
			if m, err := nodedeclaredfeatures.MatchNode(need, node); err == nil && !m.IsMatch {
				missing := slices.Sorted(slices.Values(m.UnsatisfiedRequirements))
				return []string{fmt.Sprintf(reasonDeclaredFeatures, strings.Join(missing, ", "))}
			}
		}
	}
	return nil
}

// scheduleBlocking keeps the taints that stop scheduling: NoSchedule and NoExecute.
func scheduleBlocking(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func toleratesUnschedulable(pod *corev1.Pod) bool {
	return v1helper.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations, &corev1.Taint{
		Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule,
	}, false)
}

// resourceMisfit lists every resource the node lacks for the pod, as NodeResourcesFit does.
func resourceMisfit(requests corev1.ResourceList, node *corev1.Node, used nodeUsage) []string {
	var reasons []string
	if max, ok := node.Status.Allocatable[corev1.ResourcePods]; ok && used.pods+1 > max.Value() {
		reasons = append(reasons, reasonTooManyPods)
	}
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		want := requests[name]
		if want.IsZero() || name == corev1.ResourcePods {
			continue
		}
		free := node.Status.Allocatable[name].DeepCopy()
		free.Sub(used.requests[name]) // a missing entry is zero
		if want.Cmp(free) > 0 {
			reasons = append(reasons, fmt.Sprintf(reasonInsufficient, name))
		}
	}
	return reasons
}

// unschedulableMessage renders the reasons per node as kube-scheduler's FitError does:
// "0/N nodes are available: <count> <reason>, ... ." with the histogram sorted.
func unschedulableMessage(nodes int, reasonsByNode map[string][]string) string {
	counts := map[string]int{}
	for _, reasons := range reasonsByNode {
		for _, r := range reasons {
			counts[r]++
		}
	}
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available", nodes)
	if len(parts) == 0 {
		return msg + "."
	}
	return msg + ": " + strings.Join(parts, ", ") + "."
}
