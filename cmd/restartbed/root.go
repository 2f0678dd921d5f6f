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
		Short: "A Kubernetes 1.35 test bed with an emulated kubelet, for JobSet in-place restart",
		Long: `restartbed runs a real kube-apiserver 1.35, the upstream Job, garbage-collector and node
lifecycle controllers, and emulated nodes with a scheduler in one process, so that controllers
and manifests can be exercised without a cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			setUpLogging(cmd.ErrOrStderr(), verbosity)
		},
	}
	root.PersistentFlags().IntVarP(&verbosity, "verbosity", "v", 0,
		"log level of the in-process components on stderr (0: none; 2: state changes; 5: everything)")
	root.AddCommand(newVersionCommand(), newAssetsCommand(), newDemoCommand(), newRunCommand(), newValidateCommand(), newUpCommand(), newBenchCommand())
	return root
}
