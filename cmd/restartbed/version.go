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
		Short: "Print restartbed's version and the Kubernetes releases it runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self := "(devel)"
			if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
				self = info.Main.Version
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restartbed %s\n", self)
			def := controlplane.DefaultRelease()
			for _, r := range controlplane.Releases() {
				mark := ""
				if r.Kubernetes == def.Kubernetes {
					mark = " (default)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "kubernetes %s with etcd %s%s\n", r.Kubernetes, r.Etcd, mark)
			}
			return nil
		},
	}
}
