package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print restartbed's version and the control-plane versions it runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := controlplane.CurrentVersions()
			self := "(devel)"
			if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
				self = info.Main.Version
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restartbed %s\nkube-apiserver %s\netcd %s\n", self, v.Kubernetes, v.Etcd)
			return nil
		},
	}
}
