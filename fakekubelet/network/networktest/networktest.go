// Package networktest builds a pod network over fixed Services and EndpointSlices, for the tests
// of the packages that use one (the shell's utilities, the runtime). Only tests import it.
package networktest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/restartbed/restartbed/fakekubelet/network"
)

// New returns a network configured by opts whose Services and EndpointSlices are objs (opts'
// listers are replaced); any other object fails the test.
func New(t testing.TB, opts network.Options, objs ...any) *network.Network {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	eps := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Service:
			err = svcs.Add(o)
		case *discoveryv1.EndpointSlice:
			err = eps.Add(o)
		default:
			t.Fatalf("networktest: %T is neither a Service nor an EndpointSlice", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	opts.Services, opts.EndpointSlices = corelisters.NewServiceLister(svcs), discoverylisters.NewEndpointSliceLister(eps)
	n, err := network.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
