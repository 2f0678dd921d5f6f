package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "restartbed",
		Short: "A Kubernetes 1.35 test bed with an emulated kubelet, for JobSet in-place restart",
		Long: `restartbed runs a real kube-apiserver 1.35 and the upstream Job controller and garbage
collector in one process, so that controllers and manifests can be exercised without a cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newAssetsCommand(), newDemoCommand())
	return root
}
