package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/kubeletconfig"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/nodes"
	"github.com/restartbed/restartbed/fakekubelet/pleg"
	"github.com/restartbed/restartbed/fakekubelet/prober"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/relay"
	"github.com/restartbed/restartbed/fakekubelet/release"
	"github.com/restartbed/restartbed/fakekubelet/restart"
	"github.com/restartbed/restartbed/fakekubelet/runtime"
	"github.com/restartbed/restartbed/fakekubelet/server"
	"github.com/restartbed/restartbed/fakekubelet/shards"
	"github.com/restartbed/restartbed/fakekubelet/status"
	"github.com/restartbed/restartbed/fakekubelet/token"
)

// syncFrequency is the kubelet's period of pod syncs (KubeletConfiguration syncFrequency's
// default), on which it renews projected service-account tokens.
const syncFrequency = time.Minute

// Kubelet emulates the kubelets of every node of a cluster, and its scheduler.
type Kubelet struct {
	opts Options
	// images are the nodes' image stores and pulls.
	images *images.Manager
	client kubernetes.Interface
	// ids are the nodes' kubelets' clients (Options.NodeIdentities).
	ids   *identities
	clock clock.WithTicker
	nodes *nodes.Set
	// nodeLister reads the nodes as the API has them (the informer's view); nodeIndexer is the
	// same view, indexed by pod range for a shard (shardnet.go).
	nodeLister  corelisters.NodeLister
	nodeIndexer cache.Indexer
	pods        *pods
	rt          *runtime.Runtime
	network     *network.Network
	// controlPlane is the apiserver's address on the pod network, where Dial starts.
	controlPlane *network.Interface
	status       *status.Manager
	programs     *program.Registry
	release      release.Kubelet
	events       *events
	// api is the kubelet API every node serves (Options.API), or nil.
	api *server.Server
	// serving holds each node's address on the pod network and kubelet API listeners.
	servingMu sync.Mutex
	serving   map[string]*nodeServing

	// groupNodes are the nodes of a shard's group that it declares (Options.Shard with Pools).
	groupNodes []nodes.Spec
	// shard is the kubelet's place in its group (Options.Shard), or nil; set before the
	// managed nodes are synced.
	shard *shards.Shard
	// configs are what each node's kubelet took from Options.KubeletConfigFile at its last start.
	configMu sync.Mutex
	configs  map[string]kubeletconfig.Settings

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New validates the options and fills in defaults; it starts nothing.
func New(opts Options) (*Kubelet, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	cfg := (&Kubelet{opts: opts}).clientConfig("restartbed-kubelet")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: client: %w", err)
	}
	ids, err := newIdentities(cfg, client, opts.NodeIdentities)
	if err != nil {
		return nil, err
	}
	programs, err := program.NewRegistry(opts.Programs, opts.Builtins, opts.HostBinaries != nil)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: %w", err)
	}
	rel, err := release.For(opts.KubeletVersion)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: Options.KubeletVersion: %w", err)
	}
	secretPulled, gateSet := opts.FeatureGates[gateEnsureSecretPulledImages]
	imgs, err := images.NewManager(images.Options{Rules: opts.Images, BackOff: opts.Timing.CrashLoopBackOff, BackOffMax: opts.Timing.CrashLoopBackOffMax,
		SecretPulledImages: secretPulled || !gateSet, Clock: opts.Clock})
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: Options.Images: %w", err)
	}
	var specs []nodes.Spec
	for _, pool := range opts.Pools {
		labels := maps.Clone(pool.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[PoolLabel] = pool.Name
		capacity := DefaultCapacity()
		maps.Copy(capacity, pool.Capacity)
		if opts.Shard != nil {
			labels[shards.GroupLabel] = opts.Shard.Group
		}
		for i := range pool.Count {
			specs = append(specs, nodes.Spec{Name: pool.NodeName(i), Labels: labels, Capacity: capacity, Taints: pool.Taints})
		}
	}
	var groupNodes []nodes.Spec
	if opts.Shard != nil {
		// A shard registers none: it declares its group's nodes, and the group takes them over.
		groupNodes, specs = specs, nil
	}
	var admin nodes.Client
	if opts.NodeIdentities {
		admin = client
	}
	set, err := nodes.New(nodes.Options{Client: ids.client, Admin: admin, Clock: opts.Clock, Timing: opts.Timing, KubeletVersion: opts.KubeletVersion,
		DeclaredFeatures: opts.DeclaredFeatures, Images: imgs.NodeImages, Nodes: specs})
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: %w", err)
	}
	return &Kubelet{opts: opts, client: client, ids: ids, clock: opts.Clock, programs: programs, release: rel, nodes: set,
		groupNodes: groupNodes, images: imgs, serving: map[string]*nodeServing{}, configs: map[string]kubeletconfig.Settings{}}, nil
}

// NodeNames lists the nodes in registration order.
func (k *Kubelet) NodeNames() []string {
	all := k.nodes.All()
	names := make([]string, len(all))
	for i, n := range all {
		names[i] = n.Name()
	}
	return names
}

// Start registers the nodes, starts their heartbeats and pod workers, and returns once every node
// exists and the informers have synced. ctx bounds only the start-up; the kubelet runs until Stop.
func (k *Kubelet) Start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), *k.opts.Logger))
	k.cancel = cancel
	if err := k.start(ctx, runCtx); err != nil {
		k.Stop()
		return err
	}
	return nil
}

func (k *Kubelet) start(startCtx, ctx context.Context) error {
	for _, n := range k.nodes.All() {
		serving := &nodeServing{}
		k.setServing(n.Name(), serving)
		if err := k.listen(n, serving); err != nil {
			return err
		}
	}

	// The kubelet reads pods' spec and status, never who wrote which field: managed fields would be
	// most of the cache's memory at thousands of pods.
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTransform(crcache.TransformStripManagedFields()))
	k.events = newEvents(ctx, k.clock, k.ids, func(name string) bool {
		n := k.nodes.Get(name)
		return n != nil && (n.Partitioned() || n.KubeletStopped())
	})
	k.nodeLister = factory.Core().V1().Nodes().Lister()
	if k.opts.Shard != nil {
		informer := factory.Core().V1().Nodes().Informer()
		if err := informer.AddIndexers(cache.Indexers{podCIDRIndex: nodesByPodCIDR}); err != nil {
			return fmt.Errorf("fakekubelet: node index: %w", err)
		}
		k.nodeIndexer = informer.GetIndexer()
	}
	if err := k.newNetwork(startCtx, factory); err != nil {
		return err
	}
	// Each node's kubelet reads its configuration as it starts, before its node is registered:
	// a file it refuses registers nothing.
	if err := k.startKubeletConfig(k.NodeNames()...); err != nil {
		return err
	}
	if err := k.nodes.Register(startCtx); err != nil {
		return err
	}
	if err := k.newPods(ctx, factory); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	k.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	for typ, synced := range factory.WaitForCacheSync(startCtx.Done()) {
		if !synced {
			return fmt.Errorf("fakekubelet: informer for %v did not sync: %w", typ, context.Cause(startCtx))
		}
	}
	var err error
	if k.controlPlane, err = k.network.Attach(k.opts.ControlPlaneAddr, ""); err != nil {
		return fmt.Errorf("fakekubelet: the control plane's address: %w", err)
	}
	apiserver, err := hostPort(k.opts.Config.Host)
	if err != nil {
		return fmt.Errorf("fakekubelet: Options.Config.Host: %w", err)
	}
	// A pod's connection to the kubernetes Service reaches the apiserver itself, as on a node;
	// TLS and authentication are between the pod's client and the apiserver.
	k.controlPlane.SetUplink(func(ctx context.Context, _ uint16) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", apiserver)
	})
	if k.opts.API != nil {
		if k.api, err = k.newAPIServer(); err != nil {
			return err
		}
	}
	for _, n := range k.nodes.All() {
		if err := k.attach(n, k.servingOf(n.Name())); err != nil {
			return err
		}
	}
	k.wg.Go(func() { k.status.Run(ctx, StatusWorkers) })
	k.wg.Go(func() { k.pods.run(ctx) })
	k.wg.Go(func() { k.nodes.Heartbeat(ctx, k.nodeLister) })
	if !k.opts.Manage.IsZero() {
		return k.manageNodes(ctx, factory.Core().V1().Nodes().Informer())
	}
	return nil
}

// attach gives the node its sandbox image, puts it on the pod network and serves its kubelet API
// there and on its listener, and its runtime on its CRI socket.
func (k *Kubelet) attach(n *nodes.Node, serving *nodeServing) error {
	// The node's runtime holds the release's sandbox image, as a kubeadm node's has it pulled
	// before its first pod; node.status.images lists it.
	if err := k.images.Preload(n.Name(), k.release.SandboxImage()); err != nil {
		return fmt.Errorf("fakekubelet: node %s: %w", n.Name(), err)
	}
	iface, err := k.network.Attach(n.InternalIP(), n.Name())
	if err != nil {
		return fmt.Errorf("fakekubelet: node %s: %w", n.Name(), err)
	}
	serving.iface = iface
	if err := k.serveRuntime(n, serving); err != nil {
		return err
	}
	if k.api != nil {
		return k.serve(n, serving)
	}
	return nil
}

func (k *Kubelet) setServing(name string, s *nodeServing) {
	k.servingMu.Lock()
	defer k.servingMu.Unlock()
	k.serving[name] = s
}

func (k *Kubelet) servingOf(name string) *nodeServing {
	k.servingMu.Lock()
	defer k.servingMu.Unlock()
	return k.serving[name]
}

// closeServing stops what the named node holds open, if anything.
func (k *Kubelet) closeServing(name string) {
	k.servingMu.Lock()
	s := k.serving[name]
	delete(k.serving, name)
	k.servingMu.Unlock()
	if s != nil {
		s.close()
	}
}

// Stop stops the heartbeats and the pod workers, kills every container process and
// waits for every goroutine they started. Nodes, Leases and pods stay in the API, as they would if
// every node lost power at once.
func (k *Kubelet) Stop() {
	k.stopOnce.Do(func() {
		if k.cancel != nil {
			k.cancel()
		}
		k.wg.Wait()
		for _, n := range k.nodes.All() {
			k.closeServing(n.Name())
		}
		if k.pods != nil {
			k.pods.background.Wait()
		}
		if k.events != nil {
			k.events.stop()
		}
		if k.rt != nil {
			k.rt.KillAll()
			k.rt.Wait()
		}
		k.images.Stop()
	})
}

// Dial connects from the control plane to address ("ip:port") on the pod network: a node's
// kubelet API, a pod's port, a Service's cluster IP; what the apiserver reaches through its
// egress to the cluster. A partitioned node cannot be reached.
func (k *Kubelet) Dial(ctx context.Context, address string) (net.Conn, error) {
	if k.controlPlane == nil {
		return nil, errors.New("fakekubelet: not started")
	}
	return k.controlPlane.Dial(ctx, address)
}

// newNetwork makes sure the cluster has its DNS Service and builds the pod network on the
// shared Service and EndpointSlice informers. A node cut off from the apiserver is cut off from
// the other nodes' pods too: its pods neither reach nor are reached from elsewhere.
func (k *Kubelet) newNetwork(ctx context.Context, factory informers.SharedInformerFactory) error {
	dns, err := network.EnsureDNSService(ctx, k.client)
	if err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	var elsewhere network.Elsewhere
	if k.opts.Shard != nil {
		elsewhere = &relay.Client{Locate: k.locate}
	}
	k.network, err = network.New(network.Options{DNS: dns, Rand: k.opts.Rand, APIServer: k.opts.ControlPlaneAddr,
		Services:       factory.Core().V1().Services().Lister(),
		EndpointSlices: factory.Discovery().V1().EndpointSlices().Lister(),
		Reachable: func(from, to string) bool {
			// "" is the control plane, cut off from a partitioned node as the node is from it;
			// a node this kubelet does not run is another shard's, which decides its partition.
			up := func(node string) bool {
				n := k.nodes.Get(node)
				return n == nil || !n.Partitioned()
			}
			return up(from) && up(to)
		},
		Elsewhere: elsewhere,
	})
	return err
}

// newPods builds the container runtime, the status manager and the pod workers on the shared
// pod informer.
func (k *Kubelet) newPods(ctx context.Context, factory informers.SharedInformerFactory) error {
	rules := restart.Rules{RestartAll: k.opts.FeatureGates[GateRestartAllContainers]}
	tokens, err := token.New(token.Options{Request: requestToken(k.ids), Clock: k.clock})
	if err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	sources := apiSources{client: k.client, ids: k.ids, configMaps: factory.Core().V1().ConfigMaps().Lister(), secrets: factory.Core().V1().Secrets().Lister(),
		services: factory.Core().V1().Services().Lister(), tokens: tokens}
	statusClient, err := kubernetes.NewForConfig(k.clientConfig("restartbed-kubelet-status"))
	if err != nil {
		return fmt.Errorf("fakekubelet: status client: %w", err)
	}
	p := &pods{ids: k.ids, clock: k.clock, timing: k.opts.Timing, config: k.kubeletConfig, rules: rules, events: k.events,
		changeStatusOnRestart: k.opts.FeatureGates[gateChangeStatusOnKubeletRestart],
		queue:                 workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.UID]{Name: "restartbed-pods", Clock: k.clock}),
		nodes:                 k.nodes, states: map[types.UID]*podState{}, ips: map[string]map[netip.Addr]types.UID{},
		podIP: map[types.UID]podAddress{}, started: k.clock.Now(), restarted: map[string]time.Time{}, frozen: map[types.UID]*corev1.Pod{}, release: k.release,
		sources: sources, tokens: tokens, images: k.images}
	k.images.Notify(p.pulled)
	statusFor := status.OneClient(statusClient.CoreV1())
	if k.opts.NodeIdentities {
		statusFor = k.ids.pods
	}
	k.status, err = status.New(status.Options{Client: statusFor, Rules: rules, Held: p.silenced, Clock: k.clock})
	if err != nil {
		return err
	}
	p.status = k.status
	// A shard watches its nodes' pods, each node's on its own; a kubelet of its own nodes, every pod.
	if k.opts.Shard != nil {
		p.watch = watchNodesPods(k.client, func(f func()) { k.wg.Go(f) })
	} else if p.watch, err = watchAllPods(factory); err != nil {
		return fmt.Errorf("fakekubelet: pod index: %w", err)
	}
	p.watch.onPod = p.onPod
	v := version.MustParseSemantic(k.opts.KubeletVersion) // checked by Options.complete
	k.rt, err = runtime.New(runtime.Options{Clock: k.clock, Programs: k.programs, ImageCommands: k.opts.ImageCommands, Host: k.opts.HostBinaries, ControlPlane: k.opts.ControlPlaneAddr, Network: k.network, Sources: sources, Notify: p.changed,
		ProbeUserAgent: fmt.Sprintf("kube-probe/%d.%d", v.Major(), v.Minor()),
		ConfigFor: func(pod *corev1.Pod) *rest.Config {
			cfg := program.PodServiceAccountConfig(k.opts.Config, pod)
			if n := p.nodes.Get(pod.Spec.NodeName); n != nil {
				cfg.Wrap(n.Network) // a partition cuts the pod's programs off too
			}
			return cfg
		},
	})
	if err != nil {
		return err
	}
	p.rt = k.rt
	p.pleg = pleg.New(pleg.Options{Clock: k.clock, Period: k.opts.Timing.PLEGRelistPeriod, Inspect: k.rt.Status, Sync: p.queue.Add})
	var probeRand rand.Source // the prober's own, drawn from Options.Rand before the network uses it
	if k.opts.Rand != nil {
		probeRand = rand.NewPCG(k.opts.Rand.Uint64(), k.opts.Rand.Uint64())
	}
	p.prober = prober.New(ctx, prober.Options{Clock: k.clock, Target: k.rt, Status: k.status.ContainerReader, Release: k.release,
		ChangeStatusOnKubeletRestart: p.changeStatusOnRestart,
		Updated:                      p.probeUpdated, PodIP: p.sandboxIP, Rand: probeRand,
		Unhealthy: func(pod *corev1.Pod, c *corev1.Container, format string, args ...any) {
			p.events.container(pod, c, corev1.EventTypeWarning, eventUnhealthy, format, args...)
		}})
	k.pods = p
	if k.opts.Shard == nil {
		if _, err = factory.Core().V1().Pods().Informer().AddEventHandler(p.watch.handle(false)); err != nil {
			return err
		}
	}
	k.wg.Go(func() { k.renewTokens(ctx, tokens) })
	k.wg.Go(func() { p.pleg.Run(ctx) })
	k.wg.Go(func() {
		<-ctx.Done()
		p.prober.Wait()
	})
	return k.refreshVolumesOn(factory)
}

// clientConfig is the kubelet's rest.Config with the apiserver's limits instead of client-side
// throttling.
func (k *Kubelet) clientConfig(agent string) *rest.Config {
	cfg := rest.CopyConfig(k.opts.Config)
	cfg.QPS, cfg.Burst = -1, 0
	// The kubelet talks protobuf (--kube-api-content-type's default), which costs both sides less
	// than JSON.
	cfg.ContentType, cfg.AcceptContentTypes = apiruntime.ContentTypeProtobuf, apiruntime.ContentTypeProtobuf+","+apiruntime.ContentTypeJSON
	rest.AddUserAgent(cfg, agent)
	return cfg
}

// hostPort is the host and port of a rest.Config's Host (a URL, or host[:port]), the port
// defaulting to the scheme's.
func hostPort(host string) (string, error) {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return "", err
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	if u.Scheme == "http" {
		return net.JoinHostPort(u.Hostname(), "80"), nil
	}
	return net.JoinHostPort(u.Hostname(), "443"), nil
}
