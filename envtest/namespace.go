package envtest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// EnsureNamespace creates the namespace unless it exists, as `kubectl create namespace` would,
// then waits until it can hold pods (WaitForDefaultServiceAccount).
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return c.WaitForDefaultServiceAccount(ctx, name)
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
		_, err := c.Clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, defaultServiceAccount, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the default service account of namespace %s: %w", namespace, err)
	}
	return nil
}
