package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
)

func newDemoCommand() *cobra.Command {
	var parallelism int32
	var nodes int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a cluster and watch the real controllers and the emulated nodes work",
		Long: `demo starts the default Kubernetes release's control plane (etcd, kube-apiserver,
kube-controller-manager with every default controller, kube-scheduler) with emulated nodes. It
creates a Job whose worker has a RestartAllContainers rule and shows the pods the Job controller
makes, the nodes kube-scheduler binds them to and the emulated kubelets running them; makes one
worker exit with the rule's code and shows its pod restarting all its containers in place (same
pod, same IP); then deletes the Job with foreground propagation and shows the garbage collector and
the kubelets removing everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", parallelism)
			}
			if nodes < 1 {
				return fmt.Errorf("--nodes must be at least 1, got %d", nodes)
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), parallelism, nodes)
		},
	}
	cmd.Flags().Int32Var(&parallelism, "parallelism", 2, "pods the demo Job runs at once")
	cmd.Flags().IntVar(&nodes, "nodes", 2, "emulated nodes to register")
	return cmd
}

func runDemo(ctx context.Context, out, progress io.Writer, parallelism int32, nodes int) (err error) {
	start := time.Now()
	cluster, err := envtest.Start(ctx, envtest.Options{
		Assets: controlplane.Options{Progress: progress},
		Logger: &logger,
		Nodes:  []fakekubelet.NodePool{{Name: "node", Count: nodes}},
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()
	r := cluster.Release
	fmt.Fprintf(out, "control plane: Kubernetes %s (etcd %s), started in %s (binaries from the %s: %s)\n",
		r.Kubernetes, r.Etcd, time.Since(start).Round(100*time.Millisecond), cluster.Assets.Source, cluster.Assets.Dir)
	fmt.Fprintf(out, "feature gates: %s\n", describeGates(cluster))
	fmt.Fprintf(out, "controllers:   kube-controller-manager and kube-scheduler %s; timing %s\n", r.Kubernetes, cluster.Timing.Name)
	fmt.Fprintf(out, "nodes:         %s (emulated kubelets)\n\n", strings.Join(cluster.Kubelet.NodeNames(), ", "))

	c := cluster.Client
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: metav1.NamespaceDefault},
		Spec: batchv1.JobSpec{
			Parallelism:          ptr.To(parallelism),
			Completions:          ptr.To(parallelism),
			PodReplacementPolicy: ptr.To(batchv1.Failed),
			BackoffLimit:         ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](demoGraceSeconds),
				Containers: []corev1.Container{{
					Name: "worker", Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"},
					// Exit code 42 restarts every container of the pod in place.
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever),
					RestartPolicyRules: []corev1.ContainerRestartRule{{
						Action: corev1.ContainerRestartRuleActionRestartAllContainers,
						ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{
							Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{demoRestartCode},
						},
					}},
				}},
			}},
		},
	}
	if err := c.Create(ctx, job); err != nil {
		return fmt.Errorf("creating the demo Job: %w", err)
	}
	fmt.Fprintf(out, "created Job %s/%s (parallelism %d; exit code %d of its worker restarts the pod's containers in place)\n",
		job.Namespace, job.Name, parallelism, demoRestartCode)

	listPods := func(ctx context.Context) ([]corev1.Pod, error) {
		var list corev1.PodList
		err := c.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})
		slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		return list.Items, err
	}
	var pods []corev1.Pod
	allReady := func(restarts int32) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			var err error
			if pods, err = listPods(ctx); err != nil || len(pods) != int(parallelism) {
				return false, err
			}
			for i := range pods {
				if !podReady(&pods[i]) || restartCount(&pods[i]) < restarts {
					return false, nil
				}
			}
			return true, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, allReady(0)); err != nil {
		return fmt.Errorf("waiting for the Job's %d pods to run: %w", parallelism, err)
	}
	fmt.Fprintln(out, "the Job controller created the pods, the scheduler bound them, the emulated kubelets run them:")
	printPods(out, pods)

	first := pods[0]
	if err := cluster.Kubelet.ExitContainer(first.Namespace, first.Name, "worker", demoRestartCode); err != nil {
		return err
	}
	crashed := time.Now()
	fmt.Fprintf(out, "\nthe worker of %s exited with %d:\n", first.Name, demoRestartCode)
	var restarted *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(&first), &p); err != nil {
			return false, err
		}
		restarted = &p
		return podReady(&p) && restartCount(&p) == 1, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to restart its containers in place: %w", first.Name, err)
	}
	fmt.Fprintf(out, "  the kubelet restarted all its containers in place in %s: same pod (UID %s), same IP %s, restartCount 1\n",
		time.Since(crashed).Round(10*time.Millisecond), sameOrChanged(first.UID == restarted.UID, string(restarted.UID)),
		sameOrChanged(first.Status.PodIP == restarted.Status.PodIP, restarted.Status.PodIP))

	if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return fmt.Errorf("deleting the demo Job: %w", err)
	}
	deleted := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = listPods(ctx); err != nil || len(pods) > 0 {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for the garbage collector and the kubelets to remove the Job and its pods: %w", err)
	}
	fmt.Fprintf(out, "\ndeleted the Job with foreground propagation: the garbage collector deleted its pods, the kubelets\n"+
		"stopped their containers (sh as PID 1 ignores SIGTERM, so each took its %ds grace) and removed them,\n"+
		"and the Job was gone %s later.\n", demoGraceSeconds, time.Since(deleted).Round(10*time.Millisecond))
	return nil
}

// demoGraceSeconds is the demo pods' terminationGracePeriodSeconds, short so the demo ends soon.
const demoGraceSeconds = 3

// demoRestartCode is the exit code the demo's restart rule turns into RestartAllContainers.
const demoRestartCode = 42

func sameOrChanged(same bool, value string) string {
	if same {
		return value + ", unchanged"
	}
	return value + ", CHANGED"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n = max(n, cs.RestartCount)
	}
	return n
}

func printPods(out io.Writer, pods []corev1.Pod) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  POD\tNODE\tIP\tSTATUS\tRESTARTS\tOWNER")
	for _, p := range pods {
		owner := ""
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\t%s\n", p.Name, p.Spec.NodeName, p.Status.PodIP, phase, restartCount(&p), owner)
	}
	w.Flush()
}
