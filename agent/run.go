package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Options configure Run.
type Options struct {
	Config Config
	// RESTConfig reaches the apiserver as the pod's service account. Required.
	RESTConfig *rest.Config
	// Clock paces the retries. Default: the real clock.
	Clock clock.Clock
	// Serve and RunWorker are the agent's process-level effects (see Effects). Required for the
	// mode the configuration selects.
	Serve     func(port int32, h http.Handler) error
	RunWorker func(ctx context.Context, command string) int
	// Backoff paces retries of the watch and of writes; the zero value means DefaultBackoff.
	Backoff wait.Backoff
}

// DefaultBackoff starts at 200 ms and doubles to 30 s, each wait drawn between 1× and 2× its step
// (full jitter), so agents that fail together retry apart.
func DefaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 1 << 30, Cap: 30 * time.Second}
}

// Run runs the agent until it decides to exit, and returns its exit code; stopped reports that
// ctx ended first (SIGTERM or SIGINT to the process), in which case the caller picks the code.
func Run(ctx context.Context, opts Options) (code int, stopped bool) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(opts.Config.Namespace, opts.Config.PodName),
		"jobset", klog.KRef(opts.Config.Namespace, opts.Config.JobSetName))
	ctx = klog.NewContext(ctx, logger)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backoff.Duration == 0 {
		opts.Backoff = DefaultBackoff()
	}
	jobSets, pods, err := clients(opts.RESTConfig, opts.Config)
	if err != nil {
		logger.Error(err, "Cannot reach the apiserver")
		return 1, false
	}
	cfg := opts.Config
	a := New(cfg, Effects{
		WriteAttempt: func(ctx context.Context, attempt int32) error {
			pod := corev1apply.Pod(cfg.PodName, cfg.Namespace).
				WithAnnotations(map[string]string{jobsetv1alpha2.InPlaceRestartAttemptKey: attemptValue(attempt)})
			_, err := pods.Pods(cfg.Namespace).Apply(ctx, pod, metav1.ApplyOptions{FieldManager: FieldOwner, Force: true})
			return err
		},
		Serve:     opts.Serve,
		RunWorker: opts.RunWorker,
	})
	defer a.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	backoff := opts.Backoff
	for {
		err := watchOnce(runCtx, jobSets, a)
		select {
		case <-a.Exited():
			return a.ExitCode(), false
		default:
		}
		if ctx.Err() != nil {
			return 0, true
		}
		if err == nil {
			backoff = opts.Backoff // the watch ended normally: start over without delay
			continue
		}
		delay := backoff.Step()
		logger.Info("Retrying after an error", "err", err.Error(), "after", delay)
		timer := opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, true
		case <-a.Exited():
			timer.Stop()
			return a.ExitCode(), false
		case <-timer.C():
		}
	}
}

// clients are the agent's: a reader of its JobSet and a clientset for its pod.
func clients(cfg *rest.Config, c Config) (*jobSetReader, corev1client.CoreV1Interface, error) {
	if cfg == nil {
		return nil, nil, errors.New("no rest.Config")
	}
	jobSets, err := newJobSetReader(cfg, c.Namespace, c.JobSetName)
	if err != nil {
		return nil, nil, err
	}
	// The released agent's controller-runtime client talks protobuf for built-in types such as Pod.
	podsCfg := rest.CopyConfig(cfg)
	podsCfg.ContentType, podsCfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
	pods, err := corev1client.NewForConfig(podsCfg) // the core group's client only: thousands of agents run at once
	if err != nil {
		return nil, nil, err
	}
	return jobSets, pods, nil
}

// watchOnce lists the agent's JobSet (by name, in the apiserver), reconciles it, and watches it
// from there until the watch ends, the agent decides to exit or ctx ends. Errors end it.
func watchOnce(ctx context.Context, jobSets *jobSetReader, a *Agent) error {
	current, resourceVersion, err := jobSets.list(ctx)
	if err != nil {
		return err
	}
	if err := a.Reconcile(ctx, current); err != nil {
		return err
	}
	exited := func() bool {
		select {
		case <-a.Exited():
			return true
		default:
			return false
		}
	}
	if exited() {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the agent's exit ends the watch at once, as the released agent's manager stops
		select {
		case <-a.Exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	return jobSets.watch(ctx, resourceVersion, func(ev watchEvent) (bool, error) {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			var js *jobsetv1alpha2.JobSet // a deleted JobSet is not there: the agent waits
			if ev.Type != watch.Deleted {
				js = ev.JobSet
			}
			err := a.Reconcile(ctx, js)
			return exited(), err
		case watch.Error:
			return true, fmt.Errorf("watch of JobSet %s/%s: %s", jobSets.namespace, jobSets.name, ev.Message)
		}
		return false, nil
	})
}
