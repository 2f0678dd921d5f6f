//go:build ignore

// restartbed's kube-controller-manager is upstream's command, unchanged, plus the few tunables
// that upstream keeps in Go variables or constants instead of flags. The controlplane package
// builds it from this file in each supported release's module, so every controller runs the code
// of that release.
//
// Flags that start with --restartbed- are this file's; every other argument goes to upstream's
// command as it is:
//
//	--restartbed-job-sync-batch-period         pkg/controller/job SyncJobBatchPeriod
//	--restartbed-job-pod-failure-backoff       pkg/controller/job DefaultJobPodFailureBackOff
//	--restartbed-job-pod-failure-backoff-max   pkg/controller/job MaxJobPodFailureBackOff
//	--restartbed-pod-gc-period                 pkg/controller/podgc gcCheckPeriod
//	--restartbed-pod-gc-quarantine             pkg/controller/podgc quarantineTime
//
// The pod GC constants have no variable to set. With either pod GC flag, this program runs
// upstream's pod GC controller itself (podgc.NewPodGCInternal, which takes both durations) inside
// upstream's command, once the command has configured logging; the caller then disables the
// command's own copy with --controllers=...,-pod-garbage-collector-controller. That controller
// reads --terminated-pod-gc-threshold and --kubeconfig from upstream's arguments.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // CronJob time zones, as upstream's main

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"          // as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as upstream's main
	_ "k8s.io/component-base/metrics/prometheus/version"  // as upstream's main
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/podgc"
)

const prefix = "--restartbed-"

type tunables struct {
	jobSyncBatchPeriod, jobPodFailureBackOff, jobPodFailureBackOffMax time.Duration
	podGCPeriod, podGCQuarantine                                      time.Duration
}

func main() {
	ours, upstream := split(os.Args[1:])
	var t tunables
	fs := pflag.NewFlagSet("restartbed", pflag.ContinueOnError)
	fs.DurationVar(&t.jobSyncBatchPeriod, "restartbed-job-sync-batch-period", job.SyncJobBatchPeriod, "")
	fs.DurationVar(&t.jobPodFailureBackOff, "restartbed-job-pod-failure-backoff", job.DefaultJobPodFailureBackOff, "")
	fs.DurationVar(&t.jobPodFailureBackOffMax, "restartbed-job-pod-failure-backoff-max", job.MaxJobPodFailureBackOff, "")
	fs.DurationVar(&t.podGCPeriod, "restartbed-pod-gc-period", 0, "")
	fs.DurationVar(&t.podGCQuarantine, "restartbed-pod-gc-quarantine", 0, "")
	if err := fs.Parse(ours); err != nil {
		fmt.Fprintf(os.Stderr, "restartbed kube-controller-manager: %v\n", err)
		os.Exit(2)
	}
	// Set before upstream's command builds any controller, so no reader races the writes.
	job.SyncJobBatchPeriod = t.jobSyncBatchPeriod
	job.DefaultJobPodFailureBackOff = t.jobPodFailureBackOff
	job.MaxJobPodFailureBackOff = t.jobPodFailureBackOffMax

	if t.podGCPeriod > 0 || t.podGCQuarantine > 0 {
		if t.podGCPeriod <= 0 || t.podGCQuarantine <= 0 {
			fmt.Fprintln(os.Stderr, "restartbed kube-controller-manager: --restartbed-pod-gc-period and --restartbed-pod-gc-quarantine go together")
			os.Exit(2)
		}
	}

	command := app.NewControllerManagerCommand()
	command.SetArgs(upstream)
	if t.podGCPeriod > 0 {
		// The pod GC starts inside the command, once klog is configured: until then, cli.Run
		// keeps contextual logging off, so the controller's goroutines would read klog's global
		// logger while the command replaces it (which crashed the process at start).
		runE := command.RunE
		command.RunE = func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()
			if err := applyLogging(cmd); err != nil {
				return err
			}
			if err := startPodGC(upstream, t); err != nil {
				return fmt.Errorf("restartbed: pod GC: %w", err)
			}
			return runE(cmd, args)
		}
	}
	os.Exit(cli.Run(command))
}

// applyLogging configures klog from the command's parsed logging flags, as the command's own
// RunE does first. That call, with the same configuration, then changes nothing.
func applyLogging(cmd *cobra.Command) error {
	c := logsapi.NewLoggingConfiguration()
	fs := pflag.NewFlagSet("logs", pflag.ContinueOnError)
	logsapi.AddFlags(c, fs)
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if parsed := cmd.Flags().Lookup(f.Name); err == nil && parsed != nil && parsed.Changed {
			err = f.Value.Set(parsed.Value.String())
		}
	})
	if err != nil {
		return fmt.Errorf("restartbed: logging flags: %w", err)
	}
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	return logsapi.ValidateAndApply(c, utilfeature.DefaultFeatureGate)
}

// split separates this program's flags from upstream's. Ours are always written --name=value.
func split(args []string) (ours, upstream []string) {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			ours = append(ours, a)
		} else {
			upstream = append(upstream, a)
		}
	}
	return ours, upstream
}

// startPodGC runs upstream's pod GC controller with the given period and quarantine until the
// process exits.
func startPodGC(upstream []string, t tunables) error {
	var kubeconfig string
	threshold := 12500 // --terminated-pod-gc-threshold's default
	var qps float32 = 20
	var burst = 30
	fs := pflag.NewFlagSet("upstream", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	fs.IntVar(&threshold, "terminated-pod-gc-threshold", threshold, "")
	fs.Float32Var(&qps, "kube-api-qps", qps, "")
	fs.IntVar(&burst, "kube-api-burst", burst, "")
	fs.SetOutput(discard{})
	if err := fs.Parse(upstream); err != nil {
		return err
	}
	if kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "restartbed-kube-controller-manager/pod-garbage-collector"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := klog.NewContext(context.Background(), klog.LoggerWithName(klog.Background(), "pod-garbage-collector"))
	factory := informers.NewSharedInformerFactory(client, 0)
	gc := podgc.NewPodGCInternal(ctx, client, factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		threshold, t.podGCPeriod, t.podGCQuarantine)
	factory.Start(ctx.Done())
	go gc.Run(ctx)
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
