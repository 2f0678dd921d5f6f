package main

import (
	"io"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// verbosity is the --verbosity flag, shared by every command.
var verbosity int

// logger is what in-process components log to, as set up by setUpLogging.
var logger = logr.Discard()

// setUpLogging routes klog (where upstream controllers log) and the components' logger to w at
// level v; at 0 they are silent, since upstream's retries and warnings are not the user's news.
func setUpLogging(w io.Writer, v int) {
	if v <= 0 {
		klog.SetLogger(logr.Discard())
		ctrllog.SetLogger(logr.Discard())
		return
	}
	logger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(v), textlogger.Output(w)))
	klog.SetLogger(logger)
	ctrllog.SetLogger(logger)
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "restartbed",
		Short: "A Kubernetes test bed with emulated kubelets, for JobSet in-place restart and any controller",
		Long: `restartbed runs the real control plane of a Kubernetes release (1.35, 1.36 or 1.37: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler) with emulated kubelets whose containers
really exit, restart and crash-loop, so that controllers and manifests can be exercised without
machines; its kubelets can also join a cluster it did not start (restartbed kubelet).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			setUpLogging(cmd.ErrOrStderr(), verbosity)
		},
	}
	root.PersistentFlags().IntVarP(&verbosity, "verbosity", "v", 0,
		"log level of the in-process components on stderr (0: none; 2: state changes; 5: everything)")
	root.AddCommand(newVersionCommand(), newAssetsCommand(), newDemoCommand(), newRunCommand(), newValidateCommand(), newUpCommand(), newKubeletCommand(), newSystemctlCommand(), newBenchCommand(), newExploreCommand())
	return root
}
