package podgc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
	utilpod "k8s.io/kubernetes/pkg/util/pod"
	"k8s.io/kubernetes/pkg/util/taints"
	"k8s.io/utils/clock"
)

// Upstream's names and values for what pod GC writes.
const (
	// DefaultTerminatedPodThreshold is kube-controller-manager's --terminated-pod-gc-threshold.
	DefaultTerminatedPodThreshold = 12500
	// ReasonDeletionByPodGC and MessageNodeGone are the DisruptionTarget condition of an orphan.
	ReasonDeletionByPodGC = "DeletionByPodGC"
	MessageNodeGone       = "PodGC: node no longer exists"
	// reasonEvicted is the kubelet's reason for a pod it evicted (pkg/kubelet/eviction).
	reasonEvicted = "Evicted"
)

// Options configure a Controller.
type Options struct {
	// Client writes pod status and deletes pods. Required.
	Client kubernetes.Interface
	// Pods and Nodes are informers the caller starts. Required.
	Pods  coreinformers.PodInformer
	Nodes coreinformers.NodeInformer
	// Clock times the passes and the quarantine. Default: the real clock.
	Clock clock.WithTicker
	// Period is the time between passes; Quarantine how long a node must be missing before its
	// pods are removed. Required (timing.Profile's PodGCPeriod and PodGCQuarantine).
	Period, Quarantine time.Duration
	// TerminatedThreshold is how many terminated pods may stay; 0 turns that rule off.
	// Default: DefaultTerminatedPodThreshold.
	TerminatedThreshold *int
}

// Controller collects pods, one pass per period.
type Controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	synced     []cache.InformerSynced
	clock      clock.WithTicker
	period     time.Duration
	quarantine time.Duration
	threshold  int

	// missingSince is when each node that pods are bound to was first seen missing.
	missingSince map[string]time.Time
}

// New checks the options; it starts nothing.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Pods == nil || opts.Nodes == nil {
		return nil, errors.New("podgc: Options.Client, Pods and Nodes are required")
	}
	if opts.Period <= 0 || opts.Quarantine <= 0 {
		return nil, fmt.Errorf("podgc: Period (%v) and Quarantine (%v) must be positive", opts.Period, opts.Quarantine)
	}
	c := &Controller{
		client: opts.Client, pods: opts.Pods.Lister(), nodes: opts.Nodes.Lister(),
		synced: []cache.InformerSynced{opts.Pods.Informer().HasSynced, opts.Nodes.Informer().HasSynced},
		clock:  opts.Clock, period: opts.Period, quarantine: opts.Quarantine, threshold: DefaultTerminatedPodThreshold,
		missingSince: map[string]time.Time{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if opts.TerminatedThreshold != nil {
		c.threshold = *opts.TerminatedThreshold
	}
	return c, nil
}

// Run makes a pass every period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	for {
		c.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Pass applies every rule once, in upstream's order.
func (c *Controller) Pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing pods for pod GC")
		return
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing nodes for pod GC")
		return
	}
	if c.threshold > 0 {
		c.collectTerminated(ctx, pods)
	}
	c.collectOutOfService(ctx, pods)
	c.collectOrphans(ctx, pods, nodes)
	c.collectUnscheduledTerminating(ctx, pods)
}

func terminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown:
		return false
	}
	return true
}

// collectTerminated removes the terminated pods above the threshold: evicted ones first, then
// by creation time, then by name.
func (c *Controller) collectTerminated(ctx context.Context, pods []*corev1.Pod) {
	var done []*corev1.Pod
	for _, pod := range pods {
		if terminated(pod) {
			done = append(done, pod)
		}
	}
	excess := len(done) - c.threshold
	if excess <= 0 {
		return
	}
	evicted := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == reasonEvicted
	}
	slices.SortFunc(done, func(a, b *corev1.Pod) int {
		if ea, eb := evicted(a), evicted(b); ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		}
		return strings.Compare(a.Name, b.Name)
	})
	klog.FromContext(ctx).Info("Garbage collecting terminated pods", "numPods", excess)
	c.removeAll(ctx, done[:excess], nil, "terminated pod")
}

// collectOutOfService removes terminating pods on nodes that are not Ready and that an
// administrator tainted node.kubernetes.io/out-of-service (the non-graceful node shutdown).
func (c *Controller) collectOutOfService(ctx context.Context, pods []*corev1.Pod) {
	var stuck []*corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			continue
		}
		node, err := c.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			continue
		}
		if !nodeutil.IsNodeReady(node) && taints.TaintKeyExists(node.Spec.Taints, corev1.TaintNodeOutOfService) {
			stuck = append(stuck, pod)
		}
	}
	c.removeAll(ctx, stuck, nil, "terminating pod on an out-of-service node")
}

// collectOrphans removes the pods of nodes that have been missing for the whole quarantine and
// that the apiserver confirms are gone.
func (c *Controller) collectOrphans(ctx context.Context, pods []*corev1.Pod, nodes []*corev1.Node) {
	existing := sets.New[string]()
	for _, n := range nodes {
		existing.Insert(n.Name)
	}
	now := c.clock.Now()
	referenced := sets.New[string]()
	for _, pod := range pods {
		if name := pod.Spec.NodeName; name != "" && !existing.Has(name) {
			referenced.Insert(name)
			if _, seen := c.missingSince[name]; !seen {
				c.missingSince[name] = now
			}
		}
	}
	gone := sets.New[string]()
	for name, since := range c.missingSince {
		switch {
		case !referenced.Has(name):
			delete(c.missingSince, name) // back, or no pod is bound to it any more
		case now.Sub(since) >= c.quarantine:
			// The informer may lag; upstream asks the apiserver before it believes a node gone.
			_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				gone.Insert(name)
				delete(c.missingSince, name)
			case err == nil:
				delete(c.missingSince, name)
			default:
				klog.FromContext(ctx).Error(err, "Checking whether a node is gone", "node", klog.KRef("", name))
			}
		}
	}
	var orphans []*corev1.Pod
	for _, pod := range pods {
		if gone.Has(pod.Spec.NodeName) {
			orphans = append(orphans, pod)
		}
	}
	c.removeAll(ctx, orphans, &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonDeletionByPodGC, Message: MessageNodeGone,
	}, "orphaned pod")
}

// collectUnscheduledTerminating removes deleted pods that no node ever ran.
func (c *Controller) collectUnscheduledTerminating(ctx context.Context, pods []*corev1.Pod) {
	var unscheduled []*corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && pod.Spec.NodeName == "" {
			unscheduled = append(unscheduled, pod)
		}
	}
	c.removeAll(ctx, unscheduled, nil, "unscheduled terminating pod")
}

// removeAll fails and force-deletes the pods concurrently, as upstream does, and waits.
func (c *Controller) removeAll(ctx context.Context, pods []*corev1.Pod, condition *corev1.PodCondition, what string) {
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			if err := c.failAndDelete(ctx, pod, condition); err != nil && !apierrors.IsNotFound(err) {
				klog.FromContext(ctx).Error(err, "Pod GC could not remove a "+what, "pod", klog.KObj(pod))
				return
			}
			klog.FromContext(ctx).V(2).Info("Pod GC force-deleted a "+what, "pod", klog.KObj(pod), "node", klog.KRef("", pod.Spec.NodeName))
		})
	}
	wg.Wait()
}

// failAndDelete moves a pod that is not terminal to Failed (with the condition, if any) — no
// kubelet may be left to do it — and deletes it with grace 0.
func (c *Controller) failAndDelete(ctx context.Context, pod *corev1.Pod, condition *corev1.PodCondition) error {
	if !terminated(pod) {
		status := pod.Status.DeepCopy()
		status.Phase = corev1.PodFailed
		status.ObservedGeneration = apipod.CalculatePodStatusObservedGeneration(pod)
		if condition != nil {
			cond := *condition
			cond.ObservedGeneration = apipod.CalculatePodConditionObservedGeneration(&pod.Status, pod.Generation, cond.Type)
			apipod.UpdatePodCondition(status, &cond)
		}
		if _, _, _, err := utilpod.PatchPodStatus(ctx, c.client, pod.Namespace, pod.Name, pod.UID, pod.Status, *status); err != nil {
			return err
		}
	}
	return c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0))
}
