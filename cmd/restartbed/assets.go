package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

func newAssetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "assets",
		Short: "Find or build the control-plane binaries and print their directory",
		Long: `assets prints the directory that holds kube-apiserver and etcd, looking in $KUBEBUILDER_ASSETS,
the repository's bin/ and the user cache, and building them from source into the user cache
when none has them (several minutes the first time). Use it to prepare a machine, or as
  export KUBEBUILDER_ASSETS=$(restartbed assets)
for other envtest-based suites.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := controlplane.Ensure(controlplane.Options{Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), a.Dir)
			return nil
		},
	}
}
