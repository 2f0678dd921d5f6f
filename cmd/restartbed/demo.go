package main

import (
	"context"
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
)

func newDemoCommand() *cobra.Command {
	var parallelism int32
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a cluster and watch the real Job controller and garbage collector work",
		Long: `demo starts kube-apiserver and etcd with the in-place restart feature gates, runs the upstream
Job controller and garbage collector in-process, creates a Job, shows the pods the controller
makes for it, then deletes the Job with foreground propagation and shows the garbage collector
removing it. No kubelet runs yet, so the pods stay Pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", parallelism)
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), parallelism)
		},
	}
	cmd.Flags().Int32Var(&parallelism, "parallelism", 2, "pods the demo Job runs at once")
	return cmd
}

func runDemo(ctx context.Context, out, progress io.Writer, parallelism int32) error {
	start := time.Now()
	cluster, err := envtest.Start(ctx, envtest.Options{Assets: controlplane.Options{Progress: progress}})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	v := controlplane.CurrentVersions()
	fmt.Fprintf(out, "control plane: kube-apiserver %s, etcd %s, started in %s (binaries from the %s: %s)\n",
		v.Kubernetes, v.Etcd, time.Since(start).Round(100*time.Millisecond), cluster.Assets.Source, cluster.Assets.Dir)
	fmt.Fprintf(out, "feature gates: %s\n", enabledGates(cluster.FeatureGates))
	fmt.Fprintf(out, "controllers:   job (upstream, k8s.io/kubernetes %s), garbage collector (upstream); timing %s\n\n",
		v.Kubernetes, cluster.Timing.Name)

	c := cluster.Client
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: metav1.NamespaceDefault},
		Spec: batchv1.JobSpec{
			Parallelism:          ptr.To(parallelism),
			Completions:          ptr.To(parallelism),
			PodReplacementPolicy: ptr.To(batchv1.Failed),
			BackoffLimit:         ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "busybox", Command: []string{"sleep", "3600"}}},
			}},
		},
	}
	if err := c.Create(ctx, job); err != nil {
		return fmt.Errorf("creating the demo Job: %w", err)
	}
	fmt.Fprintf(out, "created Job %s/%s (parallelism %d)\n", job.Namespace, job.Name, parallelism)

	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == int(parallelism), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Job controller to create %d pods: %w", parallelism, err)
	}
	fmt.Fprintln(out, "the Job controller created:")
	printPods(out, pods)

	if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return fmt.Errorf("deleting the demo Job: %w", err)
	}
	deleted := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for the garbage collector to finish the foreground deletion: %w", err)
	}
	fmt.Fprintf(out, "\ndeleted the Job with foreground propagation: the garbage collector removed its pods, then the Job, in %s\n",
		time.Since(deleted).Round(10*time.Millisecond))
	return nil
}

func enabledGates(gates map[string]bool) string {
	var on []string
	for name, enabled := range gates {
		if enabled {
			on = append(on, name)
		}
	}
	slices.Sort(on)
	return strings.Join(on, ", ")
}

func printPods(out io.Writer, pods []corev1.Pod) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  POD\tPHASE\tFINALIZERS\tOWNER")
	for _, p := range pods {
		owner := ""
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", p.Name, p.Status.Phase, strings.Join(p.Finalizers, ","), owner)
	}
	w.Flush()
}
