package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

func newAssetsCommand() *cobra.Command {
	var version string
	var all bool
	cmd := &cobra.Command{
		Use:   "assets",
		Short: "Find or build a release's control-plane binaries and print their directory",
		Long: `assets prints the directory that holds the control plane of a Kubernetes release (etcd,
kube-apiserver, kube-controller-manager and kube-scheduler), building it from source through the
Go module proxy into the user cache when the cache does not have it (several minutes on 2 cores,
once per release). Use it to prepare a machine (--all builds every supported release), or as
  export KUBEBUILDER_ASSETS=$(restartbed assets --kubernetes-version 1.36)
for other envtest-based suites.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			releases := controlplane.Releases()
			if !all {
				r, err := resolveRelease(version)
				if err != nil {
					return err
				}
				releases = []controlplane.Release{r}
			}
			for _, r := range releases {
				a, err := controlplane.Ensure(r, controlplane.Options{Progress: cmd.ErrOrStderr()})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), a.Dir)
			}
			return nil
		},
	}
	addKubernetesVersionFlag(cmd.Flags(), &version)
	cmd.Flags().BoolVar(&all, "all", false, "build every supported release, one directory per line")
	cmd.MarkFlagsMutuallyExclusive("all", "kubernetes-version")
	return cmd
}
