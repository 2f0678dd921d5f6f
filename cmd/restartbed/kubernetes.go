package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
)

// addKubernetesVersionFlag adds --kubernetes-version, the one name of the release a command runs.
func addKubernetesVersionFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "kubernetes-version", "", fmt.Sprintf(
		"Kubernetes release of the control plane and the emulated kubelets: a minor (1.36) or its supported version (1.36.4); supported: %s (default %s)",
		controlplane.SupportedVersions(), controlplane.DefaultRelease().Minor()))
}

// resolveRelease checks --kubernetes-version, as a usage error.
func resolveRelease(v string) (controlplane.Release, error) {
	r, err := controlplane.ResolveRelease(v)
	if err != nil {
		return r, exitError{code: exitInvalid, err: fmt.Errorf("--kubernetes-version: %w", err)}
	}
	return r, nil
}

// describeGates says which gates a cluster sets beyond its release's defaults.
func describeGates(cluster *envtest.Cluster) string {
	changed := envtest.ChangedFeatureGates(cluster.Release, cluster.FeatureGates)
	if len(changed) == 0 {
		return fmt.Sprintf("the defaults of %s", cluster.Release.Kubernetes)
	}
	return fmt.Sprintf("%s (the rest at the defaults of %s)", envtest.FormatFeatureGates(changed), cluster.Release.Kubernetes)
}
