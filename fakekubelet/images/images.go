package images

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/internal/imageglob"
)

// The reasons a container waits with while its image cannot be had (pkg/kubelet/images/types.go).
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
)

// The kubelet's event reasons for images (pkg/kubelet/events/event.go).
const (
	EventPulling       = "Pulling"
	EventPulled        = "Pulled"
	EventFailed        = "Failed"
	EventBackOff       = "BackOff"
	EventNeverPull     = "ErrImageNeverPull"
	EventInspectFailed = "InspectFailed"
)

// nodeStatusMaxImages is how many images a node reports, the largest first (the kubelet's
// nodeStatusMaxImages default); maxNamesPerImage, how many names each.
const (
	nodeStatusMaxImages = 50
	maxNamesPerImage    = 5
)

// Rule says how the registry treats the images it matches.
type Rule struct {
	// Image is a glob (package imageglob) over the image as the container names it
	// ("not-exist-image:v1") or as normalized ("docker.io/library/not-exist-image:v1").
	Image string
	// Missing: the registry has no such image; every pull fails, not found.
	Missing bool
	// Unreachable: the image's registry cannot be reached (its host does not resolve); every
	// pull fails.
	Unreachable bool
	// FailPulls: the first pulls of the image on each node fail (the registry answers 503); the
	// next ones succeed.
	FailPulls int
	// PullTime is how long a pull of the image takes while the node lacks it; nil: the
	// Options' default. A pull of an image the node has takes no time.
	PullTime *time.Duration
	// SizeBytes is the image's size (node status, the Pulled event); 0: one derived from its name.
	SizeBytes int64
}

// Problems says what is wrong with the rule, each as ".field: message".
func (r Rule) Problems() []string {
	var problems []string
	if r.Image == "" {
		problems = append(problems, ".image: required: a rule must say which images it is for")
	} else if _, err := imageglob.Compile(r.Image); err != nil {
		problems = append(problems, fmt.Sprintf(".image: bad glob %q: %v", r.Image, err))
	}
	if r.Missing && r.Unreachable {
		problems = append(problems, ".unreachable: an image is missing or its registry unreachable, not both")
	}
	if r.FailPulls < 0 {
		problems = append(problems, fmt.Sprintf(".failPulls: must not be negative, got %d", r.FailPulls))
	}
	if r.PullTime != nil && *r.PullTime < 0 {
		problems = append(problems, fmt.Sprintf(".pullTime: must not be negative, got %s", *r.PullTime))
	}
	if r.SizeBytes < 0 {
		problems = append(problems, fmt.Sprintf(".size: must not be negative, got %d", r.SizeBytes))
	}
	return problems
}

// Options configure a Manager.
type Options struct {
	// Rules are matched in order, the first that matches an image wins; an image that none
	// matches exists and pulls in PullTime, unless its registry's host never resolves (a name
	// under .invalid, or invalid.registry.k8s.io): then its registry is unreachable.
	Rules []Rule
	// PullTime is how long a pull of an image the node lacks takes, unless a rule says.
	PullTime time.Duration
	// BackOff and BackOffMax are the kubelet's image pull backoff: the first retry after a
	// failed pull waits BackOff, doubling up to BackOffMax.
	BackOff, BackOffMax time.Duration
	// SecretPulledImages is the KubeletEnsureSecretPulledImages gate (on by default from 1.35):
	// a present image's Pulled event then says the pod may use it.
	SecretPulledImages bool
	Clock              clock.WithTicker
}

// Event is an event the kubelet records on the container's pod.
type Event struct {
	Type, Reason, Message string
}

// Result is what a container's start finds of its image.
type Result struct {
	// Ref is the image's ID once it is present (its repository and digest): the start goes on.
	Ref string
	// Pulling: a pull for the start runs or waits for the node's puller; Options.Pulled brings
	// the pod's next sync when it ends.
	Pulling bool
	// Reason and Message say why the container cannot start (its Waiting state).
	Reason, Message string
	// Events are the events to record, in order.
	Events []Event
}

// Manager keeps the nodes' images and their pulls.
type Manager struct {
	opts  Options
	rules []*regexp.Regexp

	// stop ends the timers of running pulls (Stop).
	stop chan struct{}
	// pulled is told of each pod whose awaited pull has ended (Notify).
	pulled func(uid types.UID)

	mu      sync.Mutex
	nodes   map[string]*store
	backoff *flowcontrol.Backoff
	// lastErr is the last failed pull's reason and message, by backoff key: an
	// ImagePullBackOff's message repeats it. Its keys are the backoff's entries.
	lastErr map[string]string
	// pods holds each pod that asked for a pull, so that forgetting it visits only its node's
	// pulls and its own backoff keys, not every node's.
	pods map[types.UID]*podPulls
}

// podPulls are where a pod's pulls are: its node, and the backoff keys of its failed ones.
type podPulls struct {
	node   string
	failed map[string]bool
}

// store is one node's images and its puller.
type store struct {
	present map[string]image
	// failed counts the failed pulls of each image, for Rule.FailPulls.
	failed map[string]int
	// queue holds the pulls in the order asked; the first runs.
	queue []*pull
	// done holds ended pulls by pod and container until the start that waits for them reads them.
	done map[waiter]*pull
}

// image is an image a node has.
type image struct {
	names []string // repository:tag, repository@digest
	ref   string   // repository@digest
	size  int64
}

type waiter struct {
	pod       types.UID
	container string
}

// pull is one pull asked by one container's start.
type pull struct {
	waiter
	requested string // as the container names it
	named     reference.Named
	asked     time.Time
	started   time.Time
	took      time.Duration
	err       string // the runtime's error; "" on success
	ref       string
	size      int64
	running   bool
}

// NewManager returns a Manager with the rules checked: a bad glob is an error naming the rule.
func NewManager(opts Options) (*Manager, error) {
	m := &Manager{opts: opts, nodes: map[string]*store{}, lastErr: map[string]string{}, pods: map[types.UID]*podPulls{},
		stop: make(chan struct{})}
	for i, r := range opts.Rules {
		if problems := r.Problems(); len(problems) > 0 {
			return nil, fmt.Errorf("images[%d]%s", i, strings.Join(problems, "; "))
		}
		re, _ := imageglob.Compile(r.Image) // Problems refused a glob that does not compile
		m.rules = append(m.rules, re)
	}
	m.backoff = flowcontrol.NewBackOff(opts.BackOff, opts.BackOffMax)
	m.backoff.Clock = opts.Clock
	return m, nil
}

// rule returns the first rule matching the image, or the default one: the image exists, unless
// its registry's host is one no name server resolves.
func (m *Manager) rule(requested string, named reference.Named) Rule {
	for i, re := range m.rules {
		if re.MatchString(requested) || re.MatchString(named.String()) {
			return m.opts.Rules[i]
		}
	}
	return Rule{Unreachable: unresolvable(reference.Domain(named))}
}

// unresolvable reports whether a registry host never resolves: a name under the .invalid
// top-level domain (RFC 6761), or invalid.registry.k8s.io, the registry upstream's e2e suites
// name for an image that must fail to pull (test/utils/image: InvalidRegistryImage).
func unresolvable(host string) bool {
	host, _, _ = strings.Cut(host, ":")
	return host == "invalid.registry.k8s.io" || host == "invalid" || strings.HasSuffix(host, ".invalid")
}

func (m *Manager) store(node string) *store {
	s := m.nodes[node]
	if s == nil {
		s = &store{present: map[string]image{}, failed: map[string]int{}, done: map[waiter]*pull{}}
		m.nodes[node] = s
	}
	return s
}

// Preload puts images on a node, as if pulled before: a node image's or a pool's prepared
// images. A name that is not an image reference is an error.
func (m *Manager) Preload(node string, names ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.store(node)
	for _, n := range names {
		named, err := normalize(n)
		if err != nil {
			return fmt.Errorf("image %q: %w", n, err)
		}
		s.present[named.String()] = m.imageOf(n, named)
	}
	return nil
}

// normalize parses an image as the kubelet and containerd do: docker.io/library/ for a short
// name, :latest when it has neither tag nor digest.
func normalize(name string) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, err
	}
	return reference.TagNameOnly(named), nil
}

// Resolve is the image as a node's runtime names it once pulled: its normalized name
// ("docker.io/library/busybox:latest") and its reference by digest, which the registry derives
// from the name, so that every node and every pull agree on it. A name that is not an image
// reference is an error.
func Resolve(name string) (normalized, ref string, err error) {
	named, err := normalize(name)
	if err != nil {
		return "", "", err
	}
	return named.String(), digestRef(named), nil
}

func digestRef(named reference.Named) string {
	sum := sha256.Sum256([]byte(named.String()))
	return named.Name() + "@sha256:" + hex.EncodeToString(sum[:])
}

// imageOf is the image the registry serves for the reference: its digest derived from its name,
// its size from the rule or the name.
func (m *Manager) imageOf(requested string, named reference.Named) image {
	ref := digestRef(named)
	size := m.rule(requested, named).SizeBytes
	if size == 0 {
		sum := sha256.Sum256([]byte(named.String()))
		size = 2<<20 + int64(binary.BigEndian.Uint32(sum[:4])%(48<<20)) // 2 to 50 MiB
	}
	return image{names: []string{ref, named.String()}, ref: ref, size: size}
}

// Ensure is what the start of container c of the pod on the node finds of its image, now.
func (m *Manager) Ensure(node string, pod *corev1.Pod, c *corev1.Container) Result {
	requested := c.Image
	named, err := normalize(requested)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", requested, requested, err)
		return failed(ReasonInvalidImageName, msg, Event{corev1.EventTypeWarning, EventInspectFailed, msg})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.store(node)
	w := waiter{pod: pod.UID, container: c.Name}
	if p := s.done[w]; p != nil {
		delete(s.done, w)
		return m.ended(p)
	}
	if slices.ContainsFunc(s.queue, func(p *pull) bool { return p.waiter == w }) {
		return Result{Pulling: true}
	}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = defaultPolicy(named)
	}
	if img, ok := s.present[named.String()]; ok && policy != corev1.PullAlways {
		msg := fmt.Sprintf("Container image %q already present on machine", requested)
		if m.opts.SecretPulledImages {
			msg += " and can be accessed by the pod"
		}
		return Result{Ref: img.ref, Events: []Event{{corev1.EventTypeNormal, EventPulled, msg}}}
	}
	if policy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", requested)
		return failed(ReasonErrImageNeverPull, msg, Event{corev1.EventTypeWarning, EventNeverPull, msg})
	}
	if m.pods[pod.UID] == nil {
		m.pods[pod.UID] = &podPulls{node: node}
	}
	key := string(pod.UID) + "_" + requested
	if now := m.opts.Clock.Now(); m.backoff.IsInBackOffSinceUpdate(key, now) {
		msg := fmt.Sprintf("Back-off pulling image %q", requested)
		event := Event{corev1.EventTypeNormal, EventBackOff, msg}
		if last, ok := m.lastErr[key]; ok {
			msg += ": " + last
		}
		return failed(ReasonImagePullBackOff, msg, event)
	}
	pulling := Event{corev1.EventTypeNormal, EventPulling, fmt.Sprintf("Pulling image %q", requested)}
	p := &pull{waiter: w, requested: requested, named: named, asked: m.opts.Clock.Now()}
	if len(s.queue) == 0 && m.pullTime(s, p) == 0 {
		// The node's puller is idle and the pull takes no time: it ends within the start, as
		// a pull of a present image or from a registry that answers at once does within
		// startContainer, and the start goes on.
		p.started = p.asked
		m.outcome(s, p)
		r := m.ended(p)
		r.Events = append([]Event{pulling}, r.Events...)
		return r
	}
	s.queue = append(s.queue, p)
	m.next(node, s)
	return Result{Pulling: true, Events: []Event{pulling}}
}

// failed is a start that fails for its image: the reason's own event, then the start's failure.
func failed(reason, msg string, event Event) Result {
	return Result{Reason: reason, Message: msg, Events: []Event{event, {corev1.EventTypeWarning, EventFailed, "Error: " + reason}}}
}

// defaultPolicy is the apiserver's default pull policy: Always for :latest or no tag, else
// IfNotPresent (an image named by digest never changes).
func defaultPolicy(named reference.Named) corev1.PullPolicy {
	if t, ok := named.(reference.Tagged); ok && t.Tag() == "latest" {
		if _, digested := named.(reference.Digested); !digested {
			return corev1.PullAlways
		}
	}
	return corev1.PullIfNotPresent
}

// ended is the start's view of its ended pull, read once.
func (m *Manager) ended(p *pull) Result {
	if p.err != "" {
		return failed(ReasonErrImagePull, p.err,
			Event{corev1.EventTypeWarning, EventFailed, fmt.Sprintf("Failed to pull image %q: %s", p.requested, p.err)})
	}
	m.backoff.GC()
	waited := p.started.Add(p.took).Sub(p.asked)
	return Result{Ref: p.ref, Events: []Event{{corev1.EventTypeNormal, EventPulled, fmt.Sprintf(
		"Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.",
		p.requested, p.took.Truncate(time.Millisecond), waited.Truncate(time.Millisecond), p.size)}}}
}

// next starts the node's first queued pull unless one runs: the kubelet pulls one image at a
// time on each node (serializeImagePulls).
func (m *Manager) next(node string, s *store) {
	if len(s.queue) == 0 || s.queue[0].running {
		return
	}
	p := s.queue[0]
	p.running, p.started = true, m.opts.Clock.Now()
	p.took = m.pullTime(s, p)
	t := m.opts.Clock.NewTimer(p.took)
	go func() {
		select {
		case <-t.C():
			m.finish(node, s, p)
		case <-m.stop:
			t.Stop()
		}
	}()
}

// pullTime is how long pull p takes on the node's store s: its rule's or the default time for
// an image the node lacks, none for one it has or that the registry refuses at once.
func (m *Manager) pullTime(s *store, p *pull) time.Duration {
	r := m.rule(p.requested, p.named)
	if _, present := s.present[p.named.String()]; present || r.Missing || r.Unreachable {
		return 0
	}
	if r.PullTime != nil {
		return *r.PullTime
	}
	return m.opts.PullTime
}

// finish ends the node's running pull p: the image is stored or the pull fails, the pod that
// waits is told, and the next pull starts.
func (m *Manager) finish(node string, s *store, p *pull) {
	m.mu.Lock()
	if m.nodes[node] != s || len(s.queue) == 0 || s.queue[0] != p {
		m.mu.Unlock()
		return // the node or the pod was forgotten meanwhile
	}
	s.queue = s.queue[1:]
	m.outcome(s, p)
	if m.pods[p.pod] != nil { // else the pod was forgotten while its pull ran
		s.done[p.waiter] = p
	}
	m.next(node, s)
	m.mu.Unlock()
	if m.pulled != nil {
		m.pulled(p.pod)
	}
}

// outcome ends pull p on the node's store s: the image is stored, or the pull fails and its
// pod's backoff for the image starts (from the failure, as the kubelet's does).
func (m *Manager) outcome(s *store, p *pull) {
	r := m.rule(p.requested, p.named)
	name := p.named.String()
	switch {
	case r.Missing:
		p.err = fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", name, name, name)
	case r.Unreachable:
		domain := reference.Domain(p.named)
		host, _, _ := strings.Cut(domain, ":")
		p.err = fmt.Sprintf("rpc error: code = Unknown desc = failed to pull and unpack image %q: failed to resolve reference %q: failed to do request: Head \"https://%s/v2/%s/manifests/%s\": dial tcp: lookup %s: no such host",
			name, name, domain, reference.Path(p.named), tagOf(p.named), host)
	case s.failed[name] < r.FailPulls:
		s.failed[name]++
		p.err = fmt.Sprintf("rpc error: code = Unavailable desc = failed to pull and unpack image %q: failed to resolve reference %q: unexpected status from HEAD request to https://%s/v2/%s/manifests/%s: 503 Service Unavailable",
			name, name, reference.Domain(p.named), reference.Path(p.named), tagOf(p.named))
	default:
		img, ok := s.present[name]
		if !ok {
			img = m.imageOf(p.requested, p.named)
			s.present[name] = img
		}
		p.ref, p.size = img.ref, img.size
	}
	// A pod forgotten while its pull ran never starts again: its failure is not kept.
	if pp := m.pods[p.pod]; p.err != "" && pp != nil {
		key := string(p.pod) + "_" + p.requested
		m.backoff.Next(key, m.opts.Clock.Now())
		m.lastErr[key] = ReasonErrImagePull + ": " + p.err
		if pp.failed == nil {
			pp.failed = map[string]bool{}
		}
		pp.failed[key] = true
	}
}

// tagOf is the manifest a pull asks the registry for: the image's digest, else its tag.
func tagOf(named reference.Named) string {
	if d, ok := named.(reference.Digested); ok {
		return d.Digest().String()
	}
	if t, ok := named.(reference.Tagged); ok {
		return t.Tag()
	}
	return "latest"
}

// Notify has f told, outside the manager's lock, of each pod whose awaited pull has ended: its
// next sync finds the result. It is set before the first Ensure.
func (m *Manager) Notify(f func(uid types.UID)) { m.pulled = f }

// Stop ends the pulls under way; none reports its end.
func (m *Manager) Stop() { close(m.stop) }

// ForgetPod drops the pod's queued pulls and ended results; a pull that runs goes on, its image
// stored for the node, as containerd finishes a pull the kubelet gave up on.
func (m *Manager) ForgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	if pp == nil {
		return
	}
	if s := m.nodes[pp.node]; s != nil {
		s.queue = slices.DeleteFunc(s.queue, func(p *pull) bool { return p.pod == uid && !p.running })
		for w := range s.done {
			if w.pod == uid {
				delete(s.done, w)
			}
		}
	}
	m.forgetBackoff(pp)
	delete(m.pods, uid)
}

// KubeletRestarted forgets the pod's pull backoff, which the kubelet keeps in memory; its
// queued and running pulls go on, as containerd's do, and its next start joins them.
func (m *Manager) KubeletRestarted(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp := m.pods[uid]; pp != nil {
		m.forgetBackoff(pp)
	}
}

func (m *Manager) forgetBackoff(pp *podPulls) {
	for key := range pp.failed {
		delete(m.lastErr, key)
		m.backoff.Reset(key)
	}
	pp.failed = nil
}

// ForgetNode drops a node's images and pulls: the node is gone, or was replaced by a new machine.
func (m *Manager) ForgetNode(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodes, node)
}

// NodeImages are the node's images as its status reports them: the largest first, at most 50,
// each with up to 5 names.
func (m *Manager) NodeImages(node string) []corev1.ContainerImage {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.nodes[node]
	if s == nil {
		return nil
	}
	imgs := make([]image, 0, len(s.present))
	for _, img := range s.present {
		imgs = append(imgs, img)
	}
	slices.SortFunc(imgs, func(a, b image) int {
		return cmp.Or(cmp.Compare(b.size, a.size), strings.Compare(a.ref, b.ref))
	})
	out := make([]corev1.ContainerImage, 0, min(len(imgs), nodeStatusMaxImages))
	for _, img := range imgs[:min(len(imgs), nodeStatusMaxImages)] {
		out = append(out, corev1.ContainerImage{Names: slices.Clone(img.names[:min(len(img.names), maxNamesPerImage)]), SizeBytes: img.size})
	}
	return out
}
