package controllermanager

import (
	"context"
	_ "unsafe" // for go:linkname

	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/utils/clock"
)

// newJobController builds the upstream Job controller on the given clock. Upstream exports only
// NewController, which hard-wires the real clock; the clock-taking constructor it calls is
// unexported, so it is linked by name. The signature is that of k8s.io/kubernetes v1.35.4
// (pkg/controller/job/job_controller.go); TestJobControllerUsesInjectedClock fails if it drifts.
//
//go:linkname newJobController k8s.io/kubernetes/pkg/controller/job.newControllerWithClock
func newJobController(ctx context.Context, podInformer coreinformers.PodInformer, jobInformer batchinformers.JobInformer,
	kubeClient clientset.Interface, clock clock.WithTicker) (*job.Controller, error)
