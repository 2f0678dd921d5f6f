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
		Long: `demo starts kube-apiserver and etcd with the in-place restart feature gates, runs the upstream
Job, garbage-collector and node lifecycle controllers in-process and registers emulated nodes.
It creates a Job, shows the pods the Job controller makes and the nodes restartbed's scheduler
binds them to, then deletes the Job with foreground propagation and shows the garbage collector
deleting its pods. Pods do not run yet (the pod lifecycle is the next part of the emulated
kubelet), so they stay Pending on their nodes, and Terminating once deleted.`,
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

func runDemo(ctx context.Context, out, progress io.Writer, parallelism int32, nodes int) error {
	start := time.Now()
	cluster, err := envtest.Start(ctx, envtest.Options{
		Assets: controlplane.Options{Progress: progress},
		Logger: &logger,
		Nodes:  []fakekubelet.NodePool{{Name: "node", Count: nodes}},
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	v := controlplane.CurrentVersions()
	fmt.Fprintf(out, "control plane: kube-apiserver %s, etcd %s, started in %s (binaries from the %s: %s)\n",
		v.Kubernetes, v.Etcd, time.Since(start).Round(100*time.Millisecond), cluster.Assets.Source, cluster.Assets.Dir)
	fmt.Fprintf(out, "feature gates: %s\n", enabledGates(cluster.FeatureGates))
	fmt.Fprintf(out, "controllers:   job, garbage collector, node lifecycle (upstream, k8s.io/kubernetes %s); timing %s\n",
		v.Kubernetes, cluster.Timing.Name)
	fmt.Fprintf(out, "nodes:         %s (emulated kubelets, restartbed's scheduler)\n\n", strings.Join(cluster.Kubelet.NodeNames(), ", "))

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
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == int(parallelism), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Job controller to create %d pods and the scheduler to bind them: %w", parallelism, err)
	}
	fmt.Fprintln(out, "the Job controller created, and the scheduler bound:")
	printPods(out, pods)

	if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return fmt.Errorf("deleting the demo Job: %w", err)
	}
	deleted := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err
		}
		pods = list.Items
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the garbage collector to delete the Job's pods: %w", err)
	}
	fmt.Fprintf(out, "\ndeleted the Job with foreground propagation; %s later the garbage collector had deleted its pods:\n",
		time.Since(deleted).Round(10*time.Millisecond))
	printPods(out, pods)
	fmt.Fprintln(out, "\nAs on a cluster, a bound pod stays Terminating until its kubelet has stopped its containers, and")
	fmt.Fprintln(out, "the Job waits for its pods. The emulated kubelet does not run pods yet, so they stop here.")
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
	fmt.Fprintln(w, "  POD\tNODE\tSTATUS\tFINALIZERS\tOWNER")
	for _, p := range pods {
		owner := ""
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", p.Name, p.Spec.NodeName, phase, strings.Join(p.Finalizers, ","), owner)
	}
	w.Flush()
}
