package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/nodelifecycle"
	"k8s.io/kubernetes/pkg/controller/tainteviction"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/restartbed/restartbed/podgc"
	"github.com/restartbed/restartbed/timing"
)

// taintEvictionControllerName is kube-controller-manager's name for the controller; it is
// the field manager of the DisruptionTarget conditions it writes.
const taintEvictionControllerName = "taint-eviction-controller"

// Default worker counts. kube-controller-manager runs 5 Job workers and 20 GC workers for
// clusters of any size; restartbed shares two cores with the apiserver, so it runs fewer GC workers.
const (
	DefaultJobWorkers = 5
	DefaultGCWorkers  = 5
)

// Node lifecycle settings that no timing profile changes: kube-controller-manager's defaults
// (--secondary-node-eviction-rate is a tenth of the rate, --large-cluster-size-threshold,
// --unhealthy-zone-threshold).
const (
	secondaryEvictionRateRatio = 0.1
	largeClusterThreshold      = 50
	unhealthyZoneThreshold     = 0.55
)

// Options configure a Manager.
type Options struct {
	// Config reaches the apiserver with rights to every resource (the cluster admin).
	Config *rest.Config
	// Timing supplies the controllers' periods and backoffs. Required.
	Timing timing.Profile
	// Clock drives the Job controller (queues, backoff, condition times). Default: the real clock.
	// The garbage collector has no clock to inject; it only reacts to API changes.
	Clock clock.WithTicker
	// JobWorkers and GCWorkers default to DefaultJobWorkers and DefaultGCWorkers.
	JobWorkers, GCWorkers int
	// Logger receives the controllers' logs. Default: discarded.
	Logger *logr.Logger
}

// Manager runs the controllers until Stop.
type Manager struct {
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup

	release  func()
	stopOnce sync.Once
}

// New validates the options and fills in defaults; it starts nothing.
func New(opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("controllermanager: Options.Config is required")
	}
	if err := opts.Timing.Validate(); err != nil {
		return nil, fmt.Errorf("controllermanager: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.JobWorkers <= 0 {
		opts.JobWorkers = DefaultJobWorkers
	}
	if opts.GCWorkers <= 0 {
		opts.GCWorkers = DefaultGCWorkers
	}
	if opts.Logger == nil {
		discard := logr.Discard()
		opts.Logger = &discard
	}
	return &Manager{opts: opts}, nil
}

// Start builds the controllers, starts them and waits until their caches have synced, so that a
// caller's first object is seen. ctx bounds only that start-up: the controllers run until Stop,
// so a context that ends with a setup step (a test's BeforeAll, say) does not stop them.
func (m *Manager) Start(ctx context.Context) error {
	release, err := acquireJobTunables(m.opts.Timing)
	if err != nil {
		return err
	}
	m.release = release
	runCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), *m.opts.Logger))
	m.cancel = cancel
	if err := m.start(ctx, runCtx); err != nil {
		m.Stop()
		return err
	}
	return nil
}

func (m *Manager) start(startCtx, ctx context.Context) error {
	cfg := rest.CopyConfig(m.opts.Config)
	// The controllers write in bursts (a Job's pods, a GC cascade); the client-side default of
	// 5 QPS would be restartbed's bottleneck, not the apiserver.
	cfg.QPS, cfg.Burst = -1, 0
	// kube-controller-manager talks protobuf (--kube-api-content-type's default), which costs both
	// sides less than JSON.
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
	// Deprecation warnings on what upstream controllers read (v1 Endpoints, say) are upstream's
	// business, not the user's.
	cfg.WarningHandler = rest.NoWarnings{}
	// Each controller identifies itself in the apiserver's logs and metrics, as in a cluster.
	configFor := func(name string) *rest.Config {
		c := rest.CopyConfig(cfg)
		rest.AddUserAgent(c, name)
		return c
	}
	clientFor := func(name string) (*kubernetes.Clientset, error) { return kubernetes.NewForConfig(configFor(name)) }

	informerClient, err := clientFor("shared-informers")
	if err != nil {
		return fmt.Errorf("informer client: %w", err)
	}
	// kube-controller-manager strips managed fields from its informers' objects: no controller
	// reads them, and they are much of a cache's memory.
	trim := crcache.TransformStripManagedFields()
	factory := informers.NewSharedInformerFactoryWithOptions(informerClient, 0, informers.WithTransform(trim))
	jobClient, err := clientFor("job-controller")
	if err != nil {
		return fmt.Errorf("job controller client: %w", err)
	}
	jc, err := newJobController(ctx, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), jobClient, m.opts.Clock)
	if err != nil {
		return fmt.Errorf("creating the job controller: %w", err)
	}

	gcClient, err := clientFor("garbage-collector")
	if err != nil {
		return fmt.Errorf("garbage collector client: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(configFor("garbage-collector"))
	if err != nil {
		return fmt.Errorf("garbage collector metadata client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(gcClient.Discovery()))
	mapper.Reset()
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, 0, metadatainformer.WithTransform(trim))
	informersStarted := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, gcClient, metadataClient, mapper,
		garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(factory, metadataInformers), informersStarted)
	if err != nil {
		return fmt.Errorf("creating the garbage collector: %w", err)
	}

	// kube-controller-manager names the two node controllers' clients this way.
	nodeClient, err := clientFor("node-controller")
	if err != nil {
		return fmt.Errorf("node lifecycle controller client: %w", err)
	}
	t := m.opts.Timing
	nlc, err := nodelifecycle.NewNodeLifecycleController(ctx,
		factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Apps().V1().DaemonSets(), nodeClient,
		t.NodeMonitorPeriod, t.NodeStartupGracePeriod, t.NodeMonitorGracePeriod,
		t.NodeEvictionRate, t.NodeEvictionRate*secondaryEvictionRateRatio, largeClusterThreshold, unhealthyZoneThreshold)
	if err != nil {
		return fmt.Errorf("creating the node lifecycle controller: %w", err)
	}

	taintClient, err := clientFor("taint-eviction-controller")
	if err != nil {
		return fmt.Errorf("taint eviction controller client: %w", err)
	}
	tec, err := tainteviction.New(ctx, taintClient, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), taintEvictionControllerName)
	if err != nil {
		return fmt.Errorf("creating the taint eviction controller: %w", err)
	}

	podGCClient, err := clientFor("pod-garbage-collector")
	if err != nil {
		return fmt.Errorf("pod GC client: %w", err)
	}
	pgc, err := podgc.New(podgc.Options{Client: podGCClient, Pods: factory.Core().V1().Pods(), Nodes: factory.Core().V1().Nodes(),
		Clock: m.opts.Clock, Period: t.PodGCPeriod, Quarantine: t.PodGCQuarantine})
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)
	m.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
		metadataInformers.Shutdown()
	})
	for typ, synced := range factory.WaitForCacheSync(startCtx.Done()) {
		if !synced {
			return fmt.Errorf("informer for %v did not sync before the start-up ended: %w", typ, context.Cause(startCtx))
		}
	}

	resync := m.opts.Timing.GCResyncPeriod
	m.wg.Go(func() { jc.Run(ctx, m.opts.JobWorkers) })
	m.wg.Go(func() { nlc.Run(ctx) })
	m.wg.Go(func() { tec.Run(ctx) })
	m.wg.Go(func() { pgc.Run(ctx) })
	m.wg.Go(func() { gc.Run(ctx, m.opts.GCWorkers, resync) })
	// As kube-controller-manager does: rediscover resources so that the collector follows
	// owners and dependents of CRDs installed later (a JobSet's Jobs, for instance).
	m.wg.Go(func() { gc.Sync(ctx, gcClient.Discovery(), resync) })
	m.wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { mapper.Reset() }, resync) })
	return nil
}

// Stop cancels the controllers and waits until every goroutine they started has returned.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		if m.cancel != nil {
			m.cancel()
		}
		m.wg.Wait()
		if m.release != nil {
			m.release()
		}
	})
}
