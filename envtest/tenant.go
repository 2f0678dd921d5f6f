package envtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
)

// This file is a control plane that tenants share (Options.Tenants, Cluster.Tenant), as
// upstream's e2e suites share one cluster among their specs: each tenant has a namespace and
// nodes of its own, and the control plane, with its JobSet controller, serves them all. A tenant
// is a Cluster on the shared control plane as Start with Options.ExistingCluster makes one, with
// its nodes named and labelled as its own, its namespace's pods scheduled to them only, and
// Kueue's failure recovery, when it runs one, watching that namespace only.

// Labels and annotations of a tenancy. Written by Cluster.Tenant; read by kube-scheduler through
// the apiserver's PodNodeSelector admission, by the node lifecycle controller, and by whoever
// lists a tenant's nodes (Cluster.NodeSelector).
const (
	// TenantLabel names the tenant a node or namespace belongs to.
	TenantLabel = "restartbed.dev/tenant"
	// zoneLabel puts each tenant's nodes in a zone of their own: the node lifecycle controller
	// judges a zone's disruption (how many of its nodes are not ready) over that tenant's nodes,
	// as it would over the nodes of a cluster of the tenant's own.
	zoneLabel = corev1.LabelTopologyZone
	// nodeSelectorAnnotation is the PodNodeSelector admission plugin's: every pod of a
	// namespace so annotated gets the selector added to its own, so the tenant's namespace
	// schedules onto the tenant's nodes only.
	nodeSelectorAnnotation = "scheduler.alpha.kubernetes.io/node-selector"
)

// tenantNodes is how many nodes the tenants of a control plane are expected to join at once:
// it sizes the control plane's clients (Options.ExternalNodes) and stays below the count at
// which restartbed batches the endpoints controller's updates, which a cluster of one tenant's
// size would not.
const tenantNodes = 64

// tenancy is a shared control plane's record of its tenants.
type tenancy struct {
	mu   sync.Mutex
	next int
}

// tenantOf is a tenant's own record: its name, its namespace, and its pools as its options named
// them (the kubelet's are renamed).
type tenantOf struct {
	name, namespace string
	pools           []fakekubelet.NodePool
	// more are the namespaces EnsureNamespace made the tenant's, beside namespace.
	mu   sync.Mutex
	more []string
}

// own makes ns, about to be created, the tenant's: labelled as its, and its pods scheduled to
// its nodes.
func (t *tenantOf) own(ns *corev1.Namespace) {
	ns.Labels = map[string]string{TenantLabel: t.name}
	ns.Annotations = map[string]string{nodeSelectorAnnotation: TenantLabel + "=" + t.name}
	if ns.Name != t.namespace {
		t.mu.Lock()
		t.more = append(t.more, ns.Name)
		t.mu.Unlock()
	}
}

// namespaces are every namespace of the tenant's.
func (t *tenantOf) namespaces() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string{t.namespace}, t.more...)
}

// Tenant starts a tenant of the cluster, which must have been started with Options.Tenants: the
// in-process parts of opts (its nodes, programs and images, Kueue's failure recovery) on this
// control plane, as Start with Options.ExistingCluster would start them, and namespace, created
// here and the tenant's alone. The tenant's nodes are named <pool>-<tenant>-<i> and labelled
// with TenantLabel and a zone of their own; its namespace's pods are scheduled to them only, and
// so are those of the namespaces the tenant's EnsureNamespace creates (Kueue's failure recovery
// watches the first namespace only). Stop removes the namespaces (their pods at once), the
// nodes and the in-process parts, and leaves the control plane to the others.
//
// What belongs to the control plane is the cluster's: opts may name its release, timing profile
// and feature gates, never others; JobSet asks for the cluster's JobSet controller, which it must
// run; CRDs, webhooks and the control plane's own options are refused.
func (c *Cluster) Tenant(ctx context.Context, namespace string, opts Options) (*Cluster, error) {
	if c.tenants == nil {
		return nil, errors.New("Cluster.Tenant: the cluster was not started with Options.Tenants") //nolint:staticcheck // ST1005: a method's name
	}
	if err := c.checkTenant(opts); err != nil {
		return nil, err
	}
	c.tenants.mu.Lock()
	c.tenants.next++
	name := fmt.Sprintf("t%d", c.tenants.next)
	c.tenants.mu.Unlock()
	t := &tenantOf{name: name, namespace: namespace, pools: opts.Nodes}
	opts.Nodes = t.renamed()
	opts.ExistingCluster, opts.KubernetesVersion, opts.JobSet = c.Config, c.Release.Kubernetes, false
	opts.Timing = ptr.To(c.Timing)
	if opts.Clock == nil {
		opts.Clock = c.Clock
	}
	tc, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	tc.tenant = t
	if err := c.createTenantNamespace(ctx, t); err != nil {
		return nil, err
	}
	if err := tc.start(ctx, opts); err != nil {
		return nil, errors.Join(err, tc.Stop())
	}
	return tc, nil
}

// checkTenant refuses a tenant's options that are the control plane's, or differ from its.
func (c *Cluster) checkTenant(opts Options) error {
	var errs []error
	if opts.ExistingCluster != nil || opts.Tenants || opts.KubeletProcesses > 0 || len(opts.CRDs) > 0 || len(opts.CRDDirectoryPaths) > 0 {
		errs = append(errs, errors.New("a tenant's Options may not set ExistingCluster, Tenants, KubeletProcesses, CRDs or CRDDirectoryPaths: those are the shared control plane's"))
	}
	if opts.KubernetesVersion != "" {
		if r, err := controlplane.ResolveRelease(opts.KubernetesVersion); err != nil || r.Kubernetes != c.Release.Kubernetes {
			errs = append(errs, fmt.Errorf("a tenant's KubernetesVersion %q: the shared control plane runs %s", opts.KubernetesVersion, c.Release.Kubernetes))
		}
	}
	if opts.Timing != nil && !reflect.DeepEqual(*opts.Timing, c.Timing) {
		errs = append(errs, fmt.Errorf("a tenant's Timing %q: the shared control plane runs %q, whose controllers' delays a tenant cannot change", opts.Timing.Name, c.Timing.Name))
	}
	if gates, err := ResolveFeatureGates(c.Release, opts.FeatureGates); err != nil {
		errs = append(errs, err)
	} else if !maps.Equal(gates, c.FeatureGates) {
		errs = append(errs, fmt.Errorf("a tenant's FeatureGates %v: the shared control plane's components run with other gates", opts.FeatureGates))
	}
	if opts.JobSet && c.jobSetLogger == nil {
		errs = append(errs, errors.New("a tenant's JobSet: the shared control plane runs no JobSet controller (start it with Options.JobSet)"))
	}
	for i, p := range opts.Nodes {
		for _, key := range []string{TenantLabel, zoneLabel} {
			if _, ok := p.Labels[key]; ok {
				errs = append(errs, fmt.Errorf("a tenant's Nodes[%d].Labels: %s is the tenancy's", i, key))
			}
		}
		if p.NamePrefix != "" {
			errs = append(errs, fmt.Errorf("a tenant's Nodes[%d].NamePrefix: the tenancy names its nodes", i))
		}
	}
	return errors.Join(errs...)
}

// renamed are the tenant's pools as its kubelet runs them: named and labelled as the tenant's.
func (t *tenantOf) renamed() []fakekubelet.NodePool {
	out := make([]fakekubelet.NodePool, len(t.pools))
	for i, p := range t.pools {
		p.NamePrefix = p.Name + "-" + t.name
		p.Labels = maps.Clone(p.Labels)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[TenantLabel], p.Labels[zoneLabel] = t.name, t.name
		out[i] = p
	}
	return out
}

// createTenantNamespace creates the tenant's namespace, whose pods PodNodeSelector schedules to
// the tenant's nodes.
func (c *Cluster) createTenantNamespace(ctx context.Context, t *tenantOf) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.namespace}}
	t.own(ns)
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("a tenant's namespace %s exists already: a tenant's namespace is its own", t.namespace)
		}
		return fmt.Errorf("creating the tenant's namespace %s: %w", t.namespace, err)
	}
	return c.WaitForDefaultServiceAccount(ctx, t.namespace)
}

// NodeSelector selects the cluster's own nodes among the control plane's: a tenant's; nil for a
// cluster whose nodes are all its own.
func (c *Cluster) NodeSelector() labels.Selector {
	if c.tenant == nil {
		return nil
	}
	return labels.SelectorFromSet(labels.Set{TenantLabel: c.tenant.name})
}

// Namespace is a tenant's namespace, "" for a cluster of its own.
func (c *Cluster) Namespace() string {
	if c.tenant == nil {
		return ""
	}
	return c.tenant.namespace
}

// NodeName is the name of the node that Options.Nodes call name (<pool>-<i>): name itself, or in
// a tenant the node's name on the shared control plane.
func (c *Cluster) NodeName(name string) string {
	if c.tenant == nil {
		return name
	}
	for i, p := range c.tenant.pools {
		for j := range p.Count {
			if p.NodeName(j) == name {
				return c.tenant.renamed()[i].NodeName(j)
			}
		}
	}
	return name
}

// tenantCleanupTimeout bounds how long a tenant's Stop waits for its namespace to go.
const tenantCleanupTimeout = 2 * time.Minute

// deleteTenantNamespaces deletes the tenant's namespaces and their pods at once, without their
// grace: the tenant is over, and a pod on a node it cut off would never finish its deletion.
// waitTenantNamespaces then waits until the namespaces are gone.
func (c *Cluster) deleteTenantNamespaces(ctx context.Context) error {
	var errs []error
	for _, ns := range c.tenant.namespaces() {
		err := c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the tenant's namespace %s: %w", ns, err))
			continue
		}
		if _, err := c.removePods(ctx, ns); err != nil {
			errs = append(errs, fmt.Errorf("deleting the pods of the tenant's namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// removePods deletes the namespace's pods without their grace and takes their finalizers off (a
// Job's waits for the Job controller, and the namespace controller backs off up to a minute
// while a pod is left); it returns the names of those it found.
func (c *Cluster) removePods(ctx context.Context, ns string) ([]string, error) {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	for _, p := range pods.Items {
		names = append(names, p.Name)
		if p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 0 {
			err := c.Clientset.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		if len(p.Finalizers) > 0 {
			_, err := c.Clientset.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return names, errors.Join(errs...)
}

// deleteTenantLeases deletes the Leases of the tenant's nodes, which their nodes' deletion leaves
// to the garbage collector.
func (c *Cluster) deleteTenantLeases(ctx context.Context, nodes []string) error {
	var errs []error
	for _, n := range nodes {
		err := c.Clientset.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the Lease of node %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// waitTenantNamespaces waits until the tenant's namespaces are gone, removing what pods are left
// in them (the namespace controller deletes the pods' owners, which may have made more before).
func (c *Cluster) waitTenantNamespaces(ctx context.Context) error {
	var errs []error
	for _, ns := range c.tenant.namespaces() {
		var left []string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, tenantCleanupTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			left, _ = c.removePods(ctx, ns) // what it could not remove, the next poll tries again
			return false, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("the tenant's namespace %s is still there after %s (pods left: %s): %w", ns, tenantCleanupTimeout, strings.Join(left, ", "), err))
		}
	}
	return errors.Join(errs...)
}
