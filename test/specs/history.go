package specs

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2" //nolint:revive
	. "github.com/onsi/gomega"    //nolint:revive
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// PodHistory records every version of one pod that the apiserver publishes, through an
// informer, so a spec can assert on a state however briefly it lasted.
type PodHistory struct {
	mu       sync.Mutex
	versions []*corev1.Pod
	deleted  bool
}

// RecordPod starts recording the pod namespace/name until the spec ends.
func RecordPod(ctx context.Context, cs kubernetes.Interface, namespace, name string) *PodHistory {
	GinkgoHelper()
	h := &PodHistory{}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return cs.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return cs.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	record := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			h.mu.Lock()
			h.versions = append(h.versions, pod.DeepCopy())
			h.mu.Unlock()
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
		DeleteFunc: func(any) { h.mu.Lock(); h.deleted = true; h.mu.Unlock() },
	})
	Expect(err).NotTo(HaveOccurred())
	stop := make(chan struct{})
	go informer.Run(stop)
	DeferCleanup(func() { close(stop) })
	Expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)).To(BeTrue())
	return h
}

// Latest returns the newest recorded version, or nil.
func (h *PodHistory) Latest() *corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.versions) == 0 {
		return nil
	}
	return h.versions[len(h.versions)-1]
}

// Versions returns every recorded version, oldest first.
func (h *PodHistory) Versions() []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*corev1.Pod(nil), h.versions...)
}

// Deleted reports whether the pod has left the API.
func (h *PodHistory) Deleted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deleted
}

// Index returns the position of the first version at or after from that satisfies match, or -1.
func (h *PodHistory) Index(from int, match func(*corev1.Pod) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := max(from, 0); i < len(h.versions); i++ {
		if match(h.versions[i]) {
			return i
		}
	}
	return -1
}

// Condition returns the pod's condition of type t, or nil.
func Condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// NodeReady is the status of the node's Ready condition, or "" when it has none.
func NodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// ContainerStatus returns the status of the named init or regular container, or nil.
func ContainerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	if cs := restart.StatusOf(pod.Status.InitContainerStatuses, name); cs != nil {
		return cs
	}
	return restart.StatusOf(pod.Status.ContainerStatuses, name)
}

// EventMessages returns "Reason: message" of every Event about the named object in the namespace.
func EventMessages(ctx context.Context, cs kubernetes.Interface, namespace, name string) []string {
	GinkgoHelper()
	list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	Expect(err).NotTo(HaveOccurred())
	out := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
