package fakekubelet

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/restartbed/restartbed/fakekubelet/token"
)

// apiSources reads the ConfigMaps, Secrets and Services containers' environments and volumes refer to from the shared
// informers, and from the apiserver when the informer has not seen one yet: the kubelet's
// watch-based managers start watching a newly referenced object and wait for it, so an object
// created just before its pod is found.
type apiSources struct {
	client kubernetes.Interface
	// ids make a node's kubelet read an object itself before it is served from the informers.
	ids        *identities
	configMaps corelisters.ConfigMapLister
	secrets    corelisters.SecretLister
	services   corelisters.ServiceLister
	// tokens is the kubelet's token cache (pkg/kubelet/token).
	tokens *token.Manager
}

// Token is a token of the pod's service account from the kubelet's token cache.
func (s apiSources) Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error) {
	return s.tokens.Token(ctx, pod, audience, expirationSeconds)
}

// requestToken asks the TokenRequest API for a token of the service account, as the kubelet of
// the pod's node.
func requestToken(ids *identities) token.Request {
	return func(ctx context.Context, pod *corev1.Pod, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return ids.client(pod.Spec.NodeName).CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, serviceAccount, tr, metav1.CreateOptions{})
	}
}

// Services lists every Service the informer has.
func (s apiSources) Services() ([]*corev1.Service, error) {
	return s.services.List(labels.Everything())
}

func (s apiSources) ConfigMap(ctx context.Context, pod *corev1.Pod, name string) (*corev1.ConfigMap, error) {
	if err := s.ids.mayRead(ctx, pod, "configmaps", name); err != nil {
		return nil, err
	}
	namespace := pod.Namespace
	cm, err := s.configMaps.ConfigMaps(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return s.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return cm, err
}

func (s apiSources) Secret(ctx context.Context, pod *corev1.Pod, name string) (*corev1.Secret, error) {
	if err := s.ids.mayRead(ctx, pod, "secrets", name); err != nil {
		return nil, err
	}
	namespace := pod.Namespace
	secret, err := s.secrets.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return secret, err
}

// refreshVolumesOn has the pods that mount a ConfigMap or Secret project their volumes again at
// their next sync when it changes, as the kubelet's periodic remount brings updates into mounted
// volumes (a real kubelet takes up to its sync period plus its cache's TTL; restartbed follows
// the informer, and the sync waits for the next relist).
func (k *Kubelet) refreshVolumesOn(factory informers.SharedInformerFactory) error {
	refresh := func(kind string) func(obj any) {
		return func(obj any) {
			meta, ok := obj.(metav1.Object)
			if !ok {
				return
			}
			// Only the pods that project it, through the index: never a scan of every pod.
			objs, _ := k.pods.watch.store.ByIndex(sourceIndex, sourceKey(kind, meta.GetNamespace(), meta.GetName())) // fails only for an index the store lacks, and it has this one
			for _, o := range objs {
				if pod := o.(*corev1.Pod); k.nodes.Get(pod.Spec.NodeName) != nil {
					k.pods.remount(pod.UID)
				}
			}
		}
	}
	for kind, informer := range map[string]cache.SharedIndexInformer{
		"ConfigMap": factory.Core().V1().ConfigMaps().Informer(),
		"Secret":    factory.Core().V1().Secrets().Informer(),
	} {
		on := refresh(kind)
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { on(obj) }, AddFunc: on}); err != nil {
			return fmt.Errorf("fakekubelet: %s informer: %w", kind, err)
		}
	}
	return nil
}

// sourceIndex indexes the pod informer by the ConfigMaps and Secrets the pods' volumes project.
const sourceIndex = "restartbed-volume-source"

// sourceKey names a ConfigMap or Secret (kind) in sourceIndex.
func sourceKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// podSources is sourceIndex's function: the ConfigMaps and Secrets a volume of the pod
// projects, directly or in a projected volume.
func podSources(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	add := func(kind, name string) { keys = append(keys, sourceKey(kind, pod.Namespace, name)) }
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add("ConfigMap", v.ConfigMap.Name)
		case v.Secret != nil:
			add("Secret", v.Secret.SecretName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add("ConfigMap", src.ConfigMap.Name)
				}
				if src.Secret != nil {
					add("Secret", src.Secret.Name)
				}
			}
		}
	}
	return keys, nil
}

// renewTokens has the pods whose service-account tokens are due for renewal write their volumes
// again at their next sync, checked each sync period, as the kubelet's periodic remount does through its token manager,
// and drops expired tokens. A partitioned node's pods keep theirs: their kubelet cannot reach
// the TokenRequest API.
func (k *Kubelet) renewTokens(ctx context.Context, tokens *token.Manager) {
	ticker := k.clock.NewTicker(syncFrequency)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		tokens.DropExpired()
		for _, uid := range tokens.Due() {
			pod := k.pods.lookup(uid)
			if pod == nil {
				tokens.Forget(uid)
				continue
			}
			if n := k.nodes.Get(pod.Spec.NodeName); n != nil && !n.Partitioned() {
				k.pods.remount(uid)
			}
		}
	}
}

// remount asks the pod's worker to project the pod's volumes again at its next sync, as the
// kubelet's volume manager does within a pod's sync: a pod's volumes change only between its
// syncs, never while one runs. A pod the kubelet has not synced yet needs nothing: its first
// sync projects them.
func (p *pods) remount(uid types.UID) {
	st := p.known(uid)
	if st != nil {
		st.remount.Store(true)
		p.queue.Add(uid)
	}
}

// refreshVolumes projects the pod's volumes again; what cannot reach its host binaries is
// logged, as the kubelet logs a failed remount, and tried again on the next refresh.
func (p *pods) refreshVolumes(ctx context.Context, pod *corev1.Pod) {
	if err := p.rt.RefreshVolumes(ctx, pod); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to refresh the pod's volumes", "pod", klog.KObj(pod))
	}
}
