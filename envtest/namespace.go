package envtest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// EnsureNamespace creates the namespace unless it exists, as `kubectl create namespace` would,
// then waits until it can hold pods (WaitForDefaultServiceAccount). A tenant's (Cluster.Tenant)
// is the tenant's as its first is: its pods are scheduled to the tenant's nodes, and Stop
// deletes it.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if c.tenant != nil {
		c.tenant.own(ns)
	}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return c.WaitForDefaultServiceAccount(ctx, name)
}

// WaitForSchedulableNodes waits until no emulated node carries the not-ready taint that the
// apiserver gives every new node: kube-controller-manager lifts it within a node-monitor period
// of the node's first Ready status. Until then the scheduler can place pods only on the nodes it
// has already lifted it from, so pods created at once could all land on the first one. Without a
// controller-manager, or without nodes of the cluster's own (in process or in its kubelet
// processes), it returns at once.
func (c *Cluster) WaitForSchedulableNodes(ctx context.Context) error {
	if !c.controllerManager || (c.Kubelet == nil && len(c.kubeletProcesses) == 0) {
		return nil
	}
	var tainted []string
	err := wait.PollUntilContextTimeout(ctx, componentPollInterval, nodesTimeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		tainted = tainted[:0]
		for _, n := range nodes.Items {
			if c.tenant != nil && n.Labels[TenantLabel] != c.tenant.name {
				continue // another tenant's
			}
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
				tainted = append(tainted, n.Name)
			}
		}
		return len(tainted) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controller-manager to lift the not-ready taint of %d nodes (%s...): %w",
			len(tainted), strings.Join(tainted[:min(3, len(tainted))], ", "), err)
	}
	return nil
}

// WaitForDefaultServiceAccount waits until kube-controller-manager has given the namespace its
// "default" service account. Until then the apiserver's ServiceAccount admission refuses every
// pod of the namespace, in a cluster as here; upstream's e2e framework waits the same way after
// it creates a namespace. Without a controller-manager (Options.DisableControllerManager) that
// admission is off and it returns at once.
func (c *Cluster) WaitForDefaultServiceAccount(ctx context.Context, namespace string) error {
	if !c.controllerManager {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, componentPollInterval, serviceAccountTimeout, true, func(ctx context.Context) (bool, error) {
		return c.hasDefaultServiceAccount(ctx, namespace)
	})
	if err != nil {
		return fmt.Errorf("waiting for the default service account of namespace %s: %w", namespace, err)
	}
	return nil
}

// hasDefaultServiceAccount reports whether the namespace has its "default" service account yet.
func (c *Cluster) hasDefaultServiceAccount(ctx context.Context, namespace string) (bool, error) {
	_, err := c.Clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, defaultServiceAccount, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
