package fakekubelet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/test/builders"
)

// stamp is a shell command that prints the time with nanoseconds, as seconds since the epoch.
const stamp = "date +%s.%N"

// The orderings the PLEG gives (docs/fakekubelet.md, "The PLEG"). A container's start or exit
// reaches the pod workers at the next relist, a uniformly placed moment within the relist
// period after it; without a PLEG it reaches them within microseconds. The specs of a delay
// therefore measure it many times and check its median: a tenth of the period or more is what
// a relist gives, and what the runtime's own speed cannot (the chance that the median of 20
// uniform delays is below a tenth of the period is about 1 in 100,000). Slowness only lengthens
// the delays, so a loaded machine cannot fail them. What must happen without a relist is
// checked on a clock that stands still, never by an upper bound on a time, which load breaks.
var _ = Describe("The PLEG", func() {
	const pods = 20
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	// times runs the pods, waits until each is Running, and returns what times parses from
	// each pod's logs.
	times := func(ctx context.Context, podOf func(i int) *corev1.Pod, container string, parse func(string) (time.Duration, error)) []time.Duration {
		GinkgoHelper()
		for i := range pods {
			Expect(k8s.Create(ctx, podOf(i))).To(Succeed())
		}
		var out []time.Duration
		for i := range pods {
			name := podOf(i).Name
			var d time.Duration
			Eventually(func() error {
				logs, err := cluster.Kubelet.Logs(ns, name, container)
				if err != nil {
					return err
				}
				d, err = parse(logs)
				return err
			}).WithTimeout(Timeout).WithPolling(Interval).Should(Succeed(), "pod %s", name)
			out = append(out, d)
		}
		GinkgoWriter.Printf("%s: %v\n", CurrentSpecReport().LeafNodeText, out)
		return out
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}

	It("starts the init container after a sidecar at a relist after the sidecar started", func(ctx context.Context) {
		period := cluster.Timing.PLEGRelistPeriod
		// Each records when it started; the regular container, which runs after both, prints
		// the two times.
		pod := func(i int) *corev1.Pod {
			return builders.MakePod(fmt.Sprintf("sidecar-%d", i), ns).
				InitContainer(builders.MakeContainer("sidecar").RestartPolicy(corev1.ContainerRestartPolicyAlways).
					Shell(stamp+" > /shared/sidecar; sleep 3600").Mount("shared", "/shared").Obj()).
				InitContainer(builders.MakeContainer("init").Shell(stamp+" > /shared/init").Mount("shared", "/shared").Obj()).
				Container(builders.MakeContainer("main").Shell("cat /shared/sidecar /shared/init; sleep 3600").Mount("shared", "/shared").Obj()).
				EmptyDir("shared").Obj()
		}
		gaps := times(ctx, pod, "main", func(out string) (time.Duration, error) { return span(out, 2) })
		Expect(median(gaps)).To(BeNumerically(">=", period/10),
			"the init container started this soon after its sidecar (median of %d, relist period %s): %v", pods, period, gaps)
	})

	It("restarts a container that exited at a relist after its exit", func(ctx context.Context) {
		period := cluster.Timing.PLEGRelistPeriod
		// The first run records its exit; the second, started at once (no backoff before the
		// first restart), records its start and prints both.
		pod := func(i int) *corev1.Pod {
			return builders.MakePod(fmt.Sprintf("exits-%d", i), ns).RestartPolicy(corev1.RestartPolicyAlways).
				Container(builders.MakeContainer("main").Mount("state", "/state").
					Shell("if [ -f /state/exited ]; then " + stamp + " >> /state/exited; cat /state/exited; sleep 3600; fi; " +
						stamp + " > /state/exited; exit 1").Obj()).
				EmptyDir("state").Obj()
		}
		gaps := times(ctx, pod, "main", func(out string) (time.Duration, error) { return span(out, 2) })
		Expect(median(gaps)).To(BeNumerically(">=", period/10),
			"the container restarted this soon after its exit (median of %d, relist period %s): %v", pods, period, gaps)
	})

	It("kills a RestartAllContainers cleanup's containers back to back, as one SyncPod", func(ctx context.Context) {
		// A kubelet of its own, on a clock the spec drives: the clock follows the wall clock until
		// the first target gets SIGTERM and stands still from then on, so that no relist comes
		// and no grace runs out. The other targets then get their SIGTERM only if the cleanup's
		// kills run back to back in one SyncPod, each as soon as the runtime says the one before
		// ended; were each kill a sync of its own, the next would wait for a relist.
		clk := testingclock.NewFakeClock(clock.RealClock{}.Now())
		var frozen atomic.Bool
		stepping, stopStepping := context.WithCancel(context.Background())
		stepped := make(chan struct{})
		go func() {
			defer close(stepped)
			last := clock.RealClock{}.Now()
			for stepping.Err() == nil {
				time.Sleep(time.Millisecond)
				now := clock.RealClock{}.Now()
				if !frozen.Load() {
					clk.Step(now.Sub(last))
				}
				last = now
			}
		}()
		const targets = 5
		var (
			mu      sync.Mutex
			running = map[string]bool{}
			termed  []string
			exits   atomic.Int32
		)
		target := program.Func(func(ctx context.Context, c *program.Container) int {
			mu.Lock()
			running[c.Spec.Name] = true
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			defer mu.Unlock()
			frozen.Store(true)
			termed = append(termed, c.Spec.Name)
			return 0
		})
		// The source exits 42, which its rule turns into a group restart, once every target
		// runs; it runs on after the restart.
		source := program.Func(func(ctx context.Context, _ *program.Container) int {
			if exits.Add(1) > 1 {
				<-ctx.Done()
				return 0
			}
			for {
				mu.Lock()
				all := len(running) == targets
				mu.Unlock()
				if all {
					return 42
				}
				select {
				case <-ctx.Done():
					return 0
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
		rules := []program.Rule{{Container: "source", Program: source}}
		pod := builders.MakePod("cleanup", ns)
		var names []string
		for t := range targets {
			name := fmt.Sprintf("t%d", t)
			names = append(names, name)
			rules = append(rules, program.Rule{Container: name, Program: target})
			pod.Container(builders.MakeContainer(name).Obj())
		}
		p := onOwnNode(pod.Container(builders.MakeContainer("source").RestartPolicy(corev1.ContainerRestartPolicyNever).OnExitCodes(rac, in, 42).Obj()).Obj(), "pleg")
		// Cleanups run last registered first: the clock runs again before the kubelet stops, and
		// stops after it.
		DeferCleanup(func() {
			stopStepping()
			<-stepped
		})
		ownKubelet(ctx, "pleg", fakekubelet.Options{Clock: clk, Programs: rules})
		DeferCleanup(func() { frozen.Store(false) })
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(termed)
		}).WithTimeout(Timeout).WithPolling(Interval).Should(ConsistOf(names),
			"the targets that got SIGTERM; the clock stood still from the first one on")
	})
})

// span returns the time from the earliest to the latest of the n times out holds, each printed
// by stamp on a line of its own.
func span(out string, n int) (time.Duration, error) {
	lines := strings.Fields(out)
	if len(lines) != n {
		return 0, fmt.Errorf("want %d times, got %q", n, out)
	}
	var ts []time.Time
	for _, s := range lines {
		sec, frac, _ := strings.Cut(s, ".")
		secs, err := strconv.ParseInt(sec, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		nanos, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		ts = append(ts, time.Unix(secs, nanos))
	}
	first, last := slices.MinFunc(ts, time.Time.Compare), slices.MaxFunc(ts, time.Time.Compare)
	return last.Sub(first), nil
}
