package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/test/specs"
)

// The KEP-467 integration cases (seed 000, "Integration tests"), against the real controller:
// a suspended InPlaceRestart JobSet (so its Jobs make no pods) and labelled pods whose attempt
// annotations the spec writes itself, as agents would.
var _ = Describe("KEP-467 integration cases", Ordered, func() {
	var ns string
	var js *jobsetv1alpha2.JobSet
	pods := []string{"p-0", "p-1", "p-2"}

	setAttempts := func(ctx context.Context, values ...string) {
		for i, v := range values {
			if v == "" {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, jobsetv1alpha2.InPlaceRestartAttemptKey, v)
			Expect(cluster.Client.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pods[i]}},
				client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}
	}
	status := func(ctx context.Context) func() jobsetv1alpha2.JobSetStatus {
		return func() jobsetv1alpha2.JobSetStatus {
			var got jobsetv1alpha2.JobSet
			Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
			return got.Status
		}
	}
	attempts := func(current, previous *int32) OmegaMatcher {
		return And(HaveField("CurrentInPlaceRestartAttempt", Equal(current)), HaveField("PreviousInPlaceRestartAttempt", Equal(previous)))
	}
	// unchanged asserts that the JobSet's resourceVersion stays put while the controller sees pod events.
	unchanged := func(ctx context.Context) {
		var before jobsetv1alpha2.JobSet
		Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), &before)).To(Succeed())
		Consistently(func(g Gomega) {
			var now jobsetv1alpha2.JobSet
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(js), &now)).To(Succeed())
			g.Expect(now.ResourceVersion).To(Equal(before.ResourceVersion), "the JobSet was written (-before +now):\n%s",
				cmp.Diff(before, now))
		}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	}

	BeforeAll(func(ctx context.Context) {
		ns = specs.NewNamespace(ctx, cluster)
		js = sidecarModeJobSet(ns, "kep", 3, 10)
		js.Spec.Suspend = ptr.To(true)
		Expect(cluster.Client.Create(ctx, js)).To(Succeed())
		for _, name := range pods {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "kep"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"}}}}}
			Expect(cluster.Client.Create(ctx, pod)).To(Succeed())
		}
		// The controller has seen its three suspended Jobs: the specs below that expect no write
		// must not catch the status counting them (a busy machine delays the Job watch).
		Eventually(status(ctx)).WithTimeout(Timeout).WithPolling(Interval).Should(
			HaveField("ReplicatedJobsStatus", ConsistOf(HaveField("Suspended", Equal(int32(3))))))
	})

	It("all pods just became in sync: current is set", func(ctx context.Context) {
		setAttempts(ctx, "0", "0", "0")
		Eventually(status(ctx)).WithTimeout(Timeout).WithPolling(Interval).Should(attempts(ptr.To[int32](0), nil))
	})

	It("all pods in sync: the status is not updated", func(ctx context.Context) {
		setAttempts(ctx, "0") // an event for the controller, same value
		unchanged(ctx)
	})

	It("all pods were in sync but one restarted into a new attempt: previous is set", func(ctx context.Context) {
		setAttempts(ctx, "1")
		Eventually(status(ctx)).WithTimeout(Timeout).WithPolling(Interval).Should(attempts(ptr.To[int32](0), ptr.To[int32](0)))
	})

	It("pods lost sync and a second pod reached the new attempt, not all yet: the status is not updated", func(ctx context.Context) {
		setAttempts(ctx, "", "1")
		unchanged(ctx)
		Expect(status(ctx)()).To(attempts(ptr.To[int32](0), ptr.To[int32](0)))
	})
})
