// Command controller runs restartbed's JobSet controller and admission webhook as a manager
// against any cluster: the kubeconfig from --kubeconfig, $KUBECONFIG or the in-cluster service
// account. The webhook needs a serving certificate in --webhook-cert-dir (tls.crt, tls.key) and a
// webhook configuration pointing at it (controller.Configurations gives one).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/controller"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; default $KUBECONFIG, then the in-cluster service account")
	gates := controller.DefaultFeatureGates()
	fs.BoolVar(&gates.InPlaceRestart, "in-place-restart", gates.InPlaceRestart, "JobSet's InPlaceRestart feature gate (off upstream by default)")
	fs.BoolVar(&gates.RestartJob, "restart-job", gates.RestartJob, "JobSet's RestartJob feature gate: the RestartJob actions recreate only the failed Job (off upstream by default)")
	webhookEnabled := fs.Bool("webhook", true, "serve the JobSet admission webhook")
	webhookPort := fs.Int("webhook-port", 9443, "port of the admission webhook")
	certDir := fs.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with the webhook's tls.crt and tls.key")
	metrics := fs.String("metrics-bind-address", "0", `metrics endpoint address, "0" to disable`)
	probes := fs.String("health-probe-bind-address", ":8081", `healthz and readyz address, "0" to disable`)
	leaderElect := fs.Bool("leader-elect", false, "elect a leader among replicas")
	leaderNamespace := fs.String("leader-election-namespace", "", "namespace of the leader Lease (default: the in-cluster namespace)")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a flag (see -help)", fs.Args())
	}
	if *kubeconfig != "" {
		if err := os.Setenv("KUBECONFIG", *kubeconfig); err != nil {
			return err
		}
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity)))
	klog.SetLogger(logger)
	ctrl.SetLogger(logger)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no cluster to talk to: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), jobsetv1alpha2.AddToScheme(scheme)); err != nil {
		return err
	}
	opts := controller.ManagerOptions{Scheme: scheme, Logger: logger, Gates: gates,
		MetricsBindAddress: *metrics, HealthProbeBindAddress: *probes,
		LeaderElection: *leaderElect, LeaderElectionNamespace: *leaderNamespace}
	if *webhookEnabled {
		opts.Webhook = &webhook.Options{Port: *webhookPort, CertDir: *certDir}
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controller.NewManager(ctx, cfg, opts)
	if err != nil {
		return err
	}
	logger.Info("Starting the JobSet controller", "inPlaceRestart", gates.InPlaceRestart, "restartJob", gates.RestartJob, "webhook", *webhookEnabled)
	return mgr.Start(ctx)
}
