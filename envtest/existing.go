package envtest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/config/crd"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
)

// This file is Start on a cluster restartbed did not start (Options.ExistingCluster): no control
// plane of its own, the CRDs installed through controller-runtime's envtest as on any existing
// cluster, the in-process controllers as usual, and the node pools joined to the cluster as
// `restartbed kubelet` joins them (package join): listeners at JoinAddress, a serving CA of
// their own, the apiserver's published client CA, node identities.

// loopback is the default JoinAddress.
var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// checkExisting refuses the options that configure restartbed's own control plane.
func checkExisting(opts Options) error {
	var errs []error
	for _, o := range []struct {
		name string
		set  bool
	}{
		{"APIServerFlags", len(opts.APIServerFlags) > 0},
		{"ControllerManagerFlags", len(opts.ControllerManagerFlags) > 0},
		{"SchedulerFlags", len(opts.SchedulerFlags) > 0},
		{"DisableControllerManager", opts.DisableControllerManager},
		{"ExternalNodes", opts.ExternalNodes != 0},
		{"ControlPlaneOutput", opts.ControlPlaneOutput != nil},
		{"Webhooks", ownWebhooks(opts.Webhooks)},
		{"AllowHostBinaries", opts.AllowHostBinaries},
	} {
		if o.set {
			errs = append(errs, fmt.Errorf("Options.%s: configures restartbed's own control plane (or its host), and Options.ExistingCluster has none", o.name)) //nolint:staticcheck // ST1005: a field name
		}
	}
	if opts.JoinAddress.IsValid() && opts.JoinAddress.IsUnspecified() {
		errs = append(errs, fmt.Errorf("Options.JoinAddress %s: the address the apiserver reaches the nodes at, not a wildcard", opts.JoinAddress))
	}
	return errors.Join(errs...)
}

// startOnExisting connects to the existing cluster and starts what runs in this process.
func (c *Cluster) startOnExisting(ctx context.Context, opts Options) error {
	c.Config = rest.CopyConfig(opts.ExistingCluster)
	c.Config.QPS, c.Config.Burst = -1, 0
	var err error
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("the existing cluster: %w", err)
	}
	// The nodes report the apiserver's own version, patch included, as `restartbed kubelet`'s
	// do; a named release reports its own.
	kubeletVersion := c.Release.Kubernetes
	if opts.KubernetesVersion == "" {
		info, err := c.Clientset.Discovery().ServerVersion()
		if err != nil {
			return fmt.Errorf("asking the existing cluster's apiserver its version: %w", err)
		}
		if c.Release, kubeletVersion, err = controlplane.ServerRelease(info.GitVersion); err != nil {
			return fmt.Errorf("the existing cluster: %w; name a supported release in Options.KubernetesVersion", err)
		}
		if c.FeatureGates, err = ResolveFeatureGates(c.Release, opts.FeatureGates); err != nil {
			return err
		}
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return fmt.Errorf("building the controller-runtime client: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if opts.JobSet {
		if crds, err = crd.CRDs(); err != nil {
			return fmt.Errorf("reading restartbed's CRDs: %w", err)
		}
	}
	c.env = &crenvtest.Environment{
		UseExistingCluster: ptr.To(true),
		Config:             c.Config,
		Scheme:             c.Scheme,
		CRDInstallOptions: crenvtest.CRDInstallOptions{CRDs: append(crds, opts.CRDs...), Paths: opts.CRDDirectoryPaths,
			ErrorIfPathMissing: true, CleanUpAfterUse: true, MaxTime: componentStartTimeout},
	}
	if opts.JobSet {
		c.env.WebhookInstallOptions = webhookInstallOptions()
	}
	if _, err := c.env.Start(); err != nil {
		return fmt.Errorf("installing the CRDs and webhooks on the existing cluster: %w", err)
	}
	c.controllerManager = true // the cluster's own creates service accounts
	if err := c.startInProcess(ctx, opts); err != nil {
		return err
	}
	if len(opts.Nodes) == 0 {
		return nil
	}
	api := &fakekubelet.APIOptions{Listen: opts.JoinAddress}
	if !api.Listen.IsValid() {
		api.Listen = loopback
	}
	if err := fakekubelet.JoinAPI(ctx, c.Clientset, api, c.Clock.Now); err != nil {
		return fmt.Errorf("the existing cluster: %w", err)
	}
	c.Kubelet, err = fakekubelet.New(c.kubeletOptions(opts, api, kubeletVersion))
	if err != nil {
		return err
	}
	c.joined = true
	return c.Kubelet.Start(ctx)
}

// deleteJoinedNodes deletes, from an existing cluster, the nodes its kubelets registered; their
// Leases go with them (owned), their pods with the cluster's pod garbage collector.
func (c *Cluster) deleteJoinedNodes() error {
	if !c.joined || c.Kubelet == nil {
		return nil
	}
	var errs []error
	for _, name := range c.Kubelet.NodeNames() {
		err := c.Clientset.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting node %s from the existing cluster: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
