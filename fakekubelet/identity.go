package fakekubelet

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/restartbed/restartbed/fakekubelet/nodes"
)

// This file gives each node's kubelet the identity of a kubelet (Options.NodeIdentities): user
// system:node:NAME in group system:nodes, as the Node authorizer and the NodeRestriction
// admission plugin know kubelets, by impersonation from the process's identity. Everything a
// node's kubelet writes goes out as it — its Node and Lease, its pods' status and deletions, its
// events, its pods' service-account tokens — and so do its reads of the ConfigMaps and Secrets
// its pods use, which the Node authorizer allows only along its graph (a pod of the node that
// refers to the object). The watches that every node shares (pods, nodes, Services,
// EndpointSlices, ConfigMaps and Secrets for changes), the kubelet API's reviews and the
// programs' own identities stay the process's (docs/join.md says why).

// nodeClient is one node's kubelet client: the typed clients a kubelet writes with, sharing the
// process's connections. Its methods make it a nodes.Client.
type nodeClient struct {
	core         typedcorev1.CoreV1Interface
	coordination typedcoordinationv1.CoordinationV1Interface
}

func (c *nodeClient) CoreV1() typedcorev1.CoreV1Interface { return c.core }

func (c *nodeClient) CoordinationV1() typedcoordinationv1.CoordinationV1Interface {
	return c.coordination
}

// identities hands out each node's client, made on first use and kept.
type identities struct {
	// base is the process's configuration with the kubelet's content types; nil: every node
	// writes as the process (Options.NodeIdentities off).
	base *rest.Config
	// process serves every node when identities are off.
	process nodes.Client
	// transport is the process's, shared by every node's client.
	transport http.RoundTripper

	// mu guards both maps; they are read on every status write and written once per node or
	// object.
	mu      sync.RWMutex
	clients map[string]*nodeClient
	// readable holds what each node's kubelet has been allowed to read: node/kind/ns/name.
	readable map[string]bool
}

// NodeUser is the user name of a node's kubelet: system:node:NAME.
func NodeUser(node string) string { return "system:node:" + node }

func newIdentities(base *rest.Config, process nodes.Client, on bool) (*identities, error) {
	ids := &identities{process: process, clients: map[string]*nodeClient{}, readable: map[string]bool{}}
	if !on {
		return ids, nil
	}
	ids.base = rest.CopyConfig(base)
	rest.AddUserAgent(ids.base, "restartbed-kubelet")
	var err error
	if ids.transport, err = rest.TransportFor(ids.base); err != nil {
		return nil, fmt.Errorf("fakekubelet: the kubelets' transport: %w", err)
	}
	return ids, nil
}

// NodeConfig is the configuration of the named node's kubelet: the process's, acting as the
// node. It is what restartbed's kubelets use with Options.NodeIdentities.
func NodeConfig(base *rest.Config, node string) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: NodeUser(node), Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	return cfg
}

// client returns the named node's client.
func (ids *identities) client(node string) nodes.Client {
	if ids.base == nil {
		return ids.process
	}
	ids.mu.RLock()
	c := ids.clients[node]
	ids.mu.RUnlock()
	if c != nil {
		return c
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if c := ids.clients[node]; c != nil {
		return c
	}
	cfg := NodeConfig(ids.base, node)
	// The impersonating wrapper over the shared transport: one connection pool for every node.
	rt, err := rest.HTTPWrappersForConfig(cfg, ids.transport)
	c = &nodeClient{}
	if err == nil {
		httpClient := &http.Client{Transport: rt}
		if c.core, err = typedcorev1.NewForConfigAndClient(cfg, httpClient); err == nil {
			c.coordination, err = typedcoordinationv1.NewForConfigAndClient(cfg, httpClient)
		}
	}
	if err != nil {
		// Only a malformed base configuration fails here, and newIdentities built the transport
		// from it already.
		panic(fmt.Sprintf("fakekubelet: the client of node %s: %v", node, err))
	}
	ids.clients[node] = c
	return c
}

// pods is the named node's pods client, for the status manager.
func (ids *identities) pods(node string) typedcorev1.PodsGetter { return ids.client(node).CoreV1() }

// mayRead makes the named node's kubelet read the object once, as itself, before the process
// serves it from the shared informers: the Node authorizer answers whether one of the node's
// pods refers to it. An allowed read is remembered; a refused one is the error the kubelet gets.
func (ids *identities) mayRead(ctx context.Context, pod *corev1.Pod, kind, name string) error {
	if ids.base == nil {
		return nil
	}
	node := pod.Spec.NodeName
	key := node + "/" + kind + "/" + pod.Namespace + "/" + name
	ids.mu.RLock()
	ok := ids.readable[key]
	ids.mu.RUnlock()
	if ok {
		return nil
	}
	core := ids.client(node).CoreV1()
	var err error
	switch kind {
	case "configmaps":
		_, err = core.ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	case "secrets":
		_, err = core.Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	ids.mu.Lock()
	ids.readable[key] = true
	ids.mu.Unlock()
	return nil
}
