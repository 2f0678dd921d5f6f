package fakekubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// syncErrorBackOff is how long the pod worker waits before it tries a failed sync again (the
// kubelet's backOffPeriod, pkg/kubelet/kubelet.go).
const syncErrorBackOff = 10 * time.Second

// envSources reads the ConfigMaps and Secrets containers' environments refer to from the shared
// informers, and from the apiserver when the informer has not seen one yet: the kubelet's
// watch-based managers start watching a newly referenced object and wait for it, so an object
// created just before its pod is found.
type envSources struct {
	client     kubernetes.Interface
	configMaps corelisters.ConfigMapLister
	secrets    corelisters.SecretLister
}

func (s envSources) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm, err := s.configMaps.ConfigMaps(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return s.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return cm, err
}

func (s envSources) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	secret, err := s.secrets.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return secret, err
}
