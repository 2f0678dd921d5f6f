// Package runtime is the container runtime of the emulated kubelets (what containerd is to a
// real one): pod sandboxes with their IP and volumes, and container instances that run a
// program, a script or their own command, exit, are stopped with a grace period and removed.
// It keeps every instance until the kubelet removes it, so the kubelet sees exited instances
// the way it sees them through the CRI, and it reports every start and exit through a callback,
// as PLEG does.
//
// It decides nothing about restarts, ordering or status: that is the kubelet's (package
// fakekubelet). It never touches the host: files live in package vfs, commands in package shell;
// the one exception is a host binary that a program rule names, which it runs through package
// hostproc when given a Host (binary.go copies the pod's files into the binary's sandbox).
package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/images"
	"github.com/restartbed/restartbed/fakekubelet/knownimages"
	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/shell"
	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// exitStartError is containerd's exit code for a container whose process could not start.
const exitStartError = 128

// Options configure a Runtime.
type Options struct {
	// Clock stamps instances and paces grace periods and sleeps. Required.
	Clock clock.Clock
	// Programs say what containers run; nil: every container runs its own command.
	Programs *program.Registry
	// ImageCommands: a container without a command of its own runs its image's entrypoint and
	// default command, for the images package knownimages knows (busybox's sh exits at once,
	// pause sleeps, agnhost pauses). Off, it runs until stopped, whatever its image. Either way
	// a known image's executables (/agnhost, nginx) can be named by a command.
	ImageCommands bool
	// Notify is called, outside any lock, whenever the pod's sandbox or instances change: a
	// sandbox created, readied or stopped, an instance started (or failed to), exited or
	// removed, the pod removed. It must not block.
	Notify func(types.UID)
	// ConfigFor returns the rest.Config a pod's programs use (its service account). Optional.
	ConfigFor func(*corev1.Pod) *rest.Config
	// ProbeUserAgent is the User-Agent of HTTP probes; the kubelet sends kube-probe/<major>.<minor>
	// of its version. Default: kube-probe.
	ProbeUserAgent string
	// Sources give the ConfigMaps and Secrets that configMap, secret and projected volumes
	// project; nil: such volumes fail to mount unless optional.
	Sources Sources
	// Network is the pod network sandboxes attach their address to; nil: pods have no network
	// (names do not resolve, nothing is reachable) and no /etc/hosts or /etc/resolv.conf.
	Network *network.Network
	// Logs say how containers' logs are kept (size, files); their clock defaults to Clock.
	Logs logs.Options
	// Host runs the host binaries that programs name; nil: a container whose rule names one
	// fails to start.
	Host *hostproc.Host
	// ControlPlane is the apiserver's address on Network: a host binary reaches the apiserver
	// only while its pod reaches this address (a partition cuts it off).
	ControlPlane netip.Addr
}

// Runtime holds the sandboxes of every pod of every emulated node.
type Runtime struct {
	opts Options

	mu   sync.Mutex
	pods map[types.UID]*sandbox
	seq  uint64
	// nodeStorage backs hostPath volumes: per node and path, shared by that node's pods.
	nodeStorage map[string]map[string]*vfs.Volume
	// claimStorage backs persistentVolumeClaim volumes: per "<namespace>/<claim>", shared by every
	// pod that mounts the claim on any node, as a ReadWriteMany volume would be.
	claimStorage map[string]*vfs.Volume
	// files holds every sandbox's filesystems, which share volumes.
	files *vfs.Store

	procs sync.WaitGroup
}

// New returns an empty runtime.
func New(opts Options) (*Runtime, error) {
	if opts.Clock == nil {
		return nil, errors.New("runtime: Options.Clock is required")
	}
	if opts.Logs.Clock == nil {
		opts.Logs.Clock = opts.Clock
	}
	if opts.Notify == nil {
		opts.Notify = func(types.UID) {}
	}
	if opts.ProbeUserAgent == "" {
		opts.ProbeUserAgent = "kube-probe"
	}
	return &Runtime{opts: opts, pods: map[types.UID]*sandbox{}, nodeStorage: map[string]map[string]*vfs.Volume{},
		claimStorage: map[string]*vfs.Volume{}, files: vfs.NewStore(opts.Clock)}, nil
}

// sandbox is one pod's shared state.
type sandbox struct {
	uid   types.UID
	node  string
	ip    string
	ready bool
	// id and attempt are the CRI's: a sandbox that stopped under a live pod is replaced by one
	// with the next attempt and another ID (RunSandbox); createdAt is the current one's start.
	id        string
	attempt   uint32
	createdAt time.Time
	// meta is the pod's name, namespace, labels and annotations, as the sandbox's CRI
	// configuration carries them.
	meta podMeta
	// iface is the sandbox's address on the network; nil without one or once the sandbox stopped.
	iface *network.Interface
	// names are the files the kubelet writes for names (/etc/hosts, /etc/resolv.conf,
	// /etc/hostname), by path; hostname is the pod's hostname.
	names    map[string][]byte
	hostname string
	fs       *vfs.Pod
	volumes  map[string]*vfs.Volume
	// projected names the volumes that hold a projection (configMap, secret, downwardAPI,
	// projected).
	projected map[string]bool
	// serviceAccount holds the files a pod's service-account token volume carries, for pods
	// whose spec the apiserver did not give one (restartbed's control plane may run without the
	// ServiceAccount admission plugin).
	serviceAccount *vfs.Volume
	attempts       map[string]int
	// instances in creation order.
	instances []*instance
}

// instance is one container instance and its process.
type instance struct {
	status container.Status
	// sandboxID is the sandbox it was created in.
	sandboxID string
	fs        *vfs.FS
	env       shell.Env
	logs      *logs.Log
	spec      corev1.Container
	// stdin is the write end of the process's stdin when the container has one (spec stdin).
	stdin io.WriteCloser
	// term and kill deliver SIGTERM and SIGKILL; forced overrides the exit (fault injection).
	term, kill context.CancelFunc
	forced     *forcedExit
	// handlers are the HTTP handlers the process serves, by port; unbind takes them off the
	// network.
	handlers map[int32]http.Handler
	unbind   []func()
	// stopping: a stop was requested; done is closed when the process has returned.
	stopping bool
	done     chan struct{}
	// binary: the process is a host executable (package hostproc); startFailure says why it
	// could not start; hostTermination is its termination-log file on the host.
	binary          bool
	startFailure    string
	hostTermination string
}

type forcedExit struct {
	code int32
	oom  bool
}

// RunSandbox creates the pod's sandbox with its IP and volumes; it is a no-op if it exists and
// is ready. One that stopped under the pod (StopSandboxByID, as a node's reboot stops them) is
// replaced by a new sandbox, the next attempt, on the same volumes, with its address back on the
// network; its instances stay, as the exited containers of the old one. A volume that cannot be
// set up (a required ConfigMap, Secret or key is missing) is a *MountError, and no sandbox is
// created.
func (r *Runtime) RunSandbox(ctx context.Context, pod *corev1.Pod, ip string) error {
	projected := map[string]map[string]projectedFile{}
	if !r.HasSandbox(pod.UID) {
		for i := range pod.Spec.Volumes {
			v := &pod.Spec.Volumes[i]
			if !projects(v) {
				continue
			}
			files, err := projection(ctx, pod, v, r.opts.Sources, ip)
			if err != nil {
				return &MountError{Volume: v.Name, Err: err}
			}
			projected[v.Name] = files
		}
	}
	r.mu.Lock()
	defer r.opts.Notify(pod.UID) // deferred calls run last-in first-out: after the unlock
	defer r.mu.Unlock()
	if sb := r.pods[pod.UID]; sb != nil {
		if !sb.ready {
			sb.attempt++
			sb.id, sb.createdAt = sandboxID(pod.UID, sb.attempt), r.opts.Clock.Now()
		}
		sb.ready = true
		if sb.iface == nil {
			sb.iface = r.attach(sb)
		}
		return nil
	}
	sb := &sandbox{uid: pod.UID, node: pod.Spec.NodeName, ip: ip, ready: true, fs: r.files.NewPod(),
		volumes: map[string]*vfs.Volume{}, projected: map[string]bool{}, attempts: map[string]int{},
		id: sandboxID(pod.UID, 0), createdAt: r.opts.Clock.Now(), meta: metaOf(pod)}
	domain := network.DefaultDomain
	if r.opts.Network != nil {
		domain = r.opts.Network.Domain()
		sb.names = map[string][]byte{
			network.HostsPath:      network.HostsFile(pod, []string{ip}, domain),
			network.ResolvConfPath: network.PodDNS(pod, r.opts.Network.DNS(), domain).ResolvConf(),
		}
		sb.iface = r.attach(sb)
	}
	sb.hostname, _ = network.Hostname(pod, domain)
	if sb.names != nil {
		sb.names[network.HostnamePath] = []byte(sb.hostname + "\n")
	}
	for _, v := range pod.Spec.Volumes {
		sb.volumes[v.Name] = r.volume(sb, pod, &v, projected)
		if projects(&v) {
			sb.projected[v.Name] = true
		}
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		sb.serviceAccount = serviceAccountVolume(sb, pod)
	}
	r.pods[pod.UID] = sb
	return nil
}

// RefreshVolumes projects the pod's configMap, secret, downwardAPI and projected volumes again,
// as the kubelet's volume manager does on its periodic remount: updates reach the files;
// a volume whose source cannot be read keeps its content. It returns what could not be copied
// to the pod's host binaries.
func (r *Runtime) RefreshVolumes(ctx context.Context, pod *corev1.Pod) error {
	r.mu.Lock()
	sb := r.pods[pod.UID]
	r.mu.Unlock()
	if sb == nil {
		return nil
	}
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !projects(v) {
			continue
		}
		files, err := projection(ctx, pod, v, r.opts.Sources, sb.ip)
		if err != nil {
			continue
		}
		r.mu.Lock()
		vol := sb.volumes[v.Name]
		r.mu.Unlock()
		if vol != nil {
			writeProjection(vol.FS(sb.fs), files)
			errs = append(errs, r.refreshHostFiles(sb, v.Name, vol))
		}
	}
	return errors.Join(errs...)
}

// attach puts the sandbox's address on the network; nil when there is none or the address is
// not one. r.mu is held.
func (r *Runtime) attach(sb *sandbox) *network.Interface {
	addr, err := netip.ParseAddr(sb.ip)
	if r.opts.Network == nil || err != nil {
		return nil
	}
	iface, err := r.opts.Network.Attach(addr, sb.node)
	if err != nil {
		return nil // the address is still another sandbox's: the allocator gave it out twice
	}
	return iface
}

// StopSandbox marks the sandbox not ready (the pod is terminal) and takes its address off the
// network; its instances stay.
func (r *Runtime) StopSandbox(uid types.UID) {
	r.mu.Lock()
	defer r.opts.Notify(uid)
	defer r.mu.Unlock()
	if sb := r.pods[uid]; sb != nil {
		sb.stop()
	}
}

// stop marks the sandbox not ready and takes its address off the network; r.mu is held.
func (sb *sandbox) stop() {
	sb.ready = false
	detach(sb)
}

// detach takes the sandbox's address off the network; r.mu is held.
func detach(sb *sandbox) {
	if sb.iface != nil {
		sb.iface.Close()
		sb.iface = nil
	}
}

// NodeOf returns the node the pod's sandbox runs on; false if the pod has none.
func (r *Runtime) NodeOf(uid types.UID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.pods[uid]
	if sb == nil {
		return "", false
	}
	return sb.node, true
}

// HasSandbox reports whether the pod has a sandbox.
func (r *Runtime) HasSandbox(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[uid] != nil
}

// Status returns a snapshot of the pod's sandbox and instances.
func (r *Runtime) Status(uid types.UID) (container.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.pods[uid]
	if sb == nil {
		return container.PodStatus{UID: uid}, false
	}
	ps := container.PodStatus{UID: uid, IP: sb.ip, SandboxID: sb.id, SandboxReady: sb.ready, Containers: make([]container.Status, 0, len(sb.instances))}
	for i := len(sb.instances) - 1; i >= 0; i-- {
		ps.Containers = append(ps.Containers, sb.instances[i].status)
	}
	return ps, true
}

// imageOf is the image as containerd reports a started container's: its normalized name and
// digest (images.Resolve). The image manager refused a name that is not a reference before any
// start; a caller that did not ask it gets the name back for both.
func imageOf(image string) (name, ref string) {
	name, ref, err := images.Resolve(image)
	if err != nil {
		return image, image
	}
	return name, ref
}

// Start creates and starts an instance of c. A container whose command cannot run gets an
// instance that exited at once with containerd's StartError; the error says why.
func (r *Runtime) Start(pod *corev1.Pod, c *corev1.Container, env []string) (container.Status, error) {
	r.mu.Lock()
	sb := r.pods[pod.UID]
	if sb == nil {
		r.mu.Unlock()
		return container.Status{}, fmt.Errorf("runtime: pod %s/%s has no sandbox", pod.Namespace, pod.Name)
	}
	r.seq++
	now := r.opts.Clock.Now()
	sum := sha256.Sum256([]byte(string(pod.UID) + "/" + c.Name + "/" + strconv.FormatUint(r.seq, 10)))
	image, imageRef := imageOf(c.Image)
	in := &instance{
		status: container.Status{ID: hex.EncodeToString(sum[:]), Name: c.Name, Attempt: sb.attempts[c.Name], State: container.Running,
			CreatedAt: now, StartedAt: now, Image: image, ImageRef: imageRef, SpecImage: c.Image},
		sandboxID: sb.id,
		spec:      *c.DeepCopy(),
		logs:      logs.New(r.opts.Logs),
		handlers:  map[int32]http.Handler{},
		done:      make(chan struct{}),
	}
	sb.attempts[c.Name]++
	in.fs = sb.fs.NewFS()
	// A mount runc cannot make fails the container's start (StartError), as on a node.
	var startErr error
	serviceAccountMounted := false
	for _, m := range c.VolumeMounts {
		if v := sb.volumes[m.Name]; v != nil && startErr == nil {
			startErr = mountError(in.fs.Mount(m.MountPath, v), m.Name, m.MountPath)
		}
		serviceAccountMounted = serviceAccountMounted || path.Clean(m.MountPath) == ServiceAccountDir
	}
	if sb.serviceAccount != nil && !serviceAccountMounted && startErr == nil {
		startErr = mountError(in.fs.Mount(ServiceAccountDir, sb.serviceAccount), "kube-api-access", ServiceAccountDir)
	}
	writeNames(in.fs, sb.names, c.VolumeMounts)
	stdout, stderr := in.logs.Writer(logs.Stdout), in.logs.Writer(logs.Stderr)
	img, known := knownimages.Lookup(c.Image)
	in.env = shell.Env{FS: in.fs, Vars: env, Dir: c.WorkingDir, Stdout: stdout, Stderr: stderr, MainStdout: stdout, MainStderr: stderr,
		Clock: r.opts.Clock, Hostname: sb.hostname, Commands: img.Commands, Init: &shell.Init{}}
	if sb.iface != nil {
		in.env.Net = sb.iface
	}
	if c.Stdin {
		pr, pw := io.Pipe()
		in.env.Stdin, in.stdin = pr, pw
		in.env.TTY = c.TTY
	}
	sb.instances = append(sb.instances, in)
	pruneExited(sb, c.Name)

	choice := r.opts.Programs.Lookup(c)
	argv := commandOf(c, env, img, known && r.opts.ImageCommands)
	if startErr == nil && choice.Program == nil && choice.Script == "" && argv != nil {
		startErr = shell.Check(argv, img.Commands)
	}
	if startErr != nil {
		in.status.State = container.Exited
		in.status.StartedAt = time.Time{}
		in.status.FinishedAt = now
		in.status.ExitCode = exitStartError
		in.status.Reason = container.ReasonStartError
		in.status.Message = startErrorMessage(startErr)
		close(in.done)
		st := in.status
		r.mu.Unlock()
		r.opts.Notify(pod.UID)
		return st, startErr
	}
	termCtx, term := context.WithCancel(context.Background())
	killCtx, kill := context.WithCancel(context.Background())
	in.term, in.kill = term, kill
	st := in.status
	r.procs.Add(1)
	r.mu.Unlock()

	// A process the shell does not run is a program with handlers for SIGTERM and SIGINT: kill 1
	// from the container stops it as the kubelet's SIGTERM does. RunMain handles its own.
	stopsOnSignal := shell.StopsOn(term)
	var run func() int
	switch {
	case choice.Binary != "":
		in.binary = true
		run = func() int { return r.runBinary(termCtx, killCtx, pod, in, choice.Binary, env) }
	case choice.Program != nil:
		pc := &program.Container{Pod: pod.DeepCopy(), Spec: &in.spec, Env: env, Clock: r.opts.Clock, FS: in.fs,
			Stdout: in.env.Stdout, Stderr: in.env.Stderr, Serve: func(port int32, h http.Handler) { r.serve(pod.UID, in, port, h) }}
		if r.opts.ConfigFor != nil {
			pc.Config = r.opts.ConfigFor(pod)
		}
		in.env.Init.Handle(stopsOnSignal)
		run = func() int { return runProgram(termCtx, killCtx, choice.Program, pc) }
	case choice.Script != "":
		run = func() int { return shell.RunMain(termCtx, killCtx, []string{"sh", "-c", choice.Script}, in.env) }
	case argv != nil:
		run = func() int { return shell.RunMain(termCtx, killCtx, argv, in.env) }
	default:
		// No command, and an image whose process restartbed does not run (Options.ImageCommands):
		// a process that runs until it is stopped and exits on SIGTERM.
		in.env.Init.Handle(stopsOnSignal)
		run = func() int {
			select {
			case <-termCtx.Done():
				return shell.ExitTerminated
			case <-killCtx.Done():
				return shell.ExitKilled
			}
		}
	}
	go func() {
		defer r.procs.Done()
		code := run()
		r.exited(pod.UID, in, int32(code))
	}()
	r.opts.Notify(pod.UID)
	return st, nil
}

// runProgram runs an in-process program; when SIGKILL comes first, it reports 137 at once and
// leaves the program to return on its own (Wait still waits for it).
func runProgram(term, kill context.Context, p program.Program, c *program.Container) int {
	result := make(chan int, 1)
	go func() { result <- p.Run(term, c) }()
	select {
	case code := <-result:
		return code
	case <-kill.Done():
		return shell.ExitKilled
	}
}

// commandOf is the argv a container runs with $(VAR) references expanded, or nil when it runs
// until stopped. With its image's configuration (fromImage), it is what the container runtime
// runs (knownimages.Config.Argv). Without: the container's command and args; args alone when
// they name a shell, a utility or one of the image's commands (busybox images have no
// entrypoint); nil when it has no command.
func commandOf(c *corev1.Container, env []string, img knownimages.Config, fromImage bool) []string {
	var argv []string
	switch {
	case fromImage:
		argv = img.Argv(c.Command, c.Args)
	case len(c.Command) > 0:
		argv = append(slices.Clone(c.Command), c.Args...)
	case len(c.Args) > 0 && shell.Check(c.Args, img.Commands) == nil:
		argv = slices.Clone(c.Args)
	}
	if len(argv) == 0 {
		return nil
	}
	return expandArgs(argv, env)
}

// pruneExited keeps at most the two newest instances of a container, as the kubelet's container
// garbage collection keeps one dead instance besides the current one; sb is locked.
func pruneExited(sb *sandbox, name string) {
	seen := 0
	for i := len(sb.instances) - 1; i >= 0; i-- {
		in := sb.instances[i]
		if in.status.Name != name {
			continue
		}
		seen++
		if seen > 2 && in.status.State == container.Exited {
			sb.instances = slices.Delete(sb.instances, i, i+1)
		}
	}
}

// exited records a process's end.
func (r *Runtime) exited(uid types.UID, in *instance, code int32) {
	in.logs.Close()
	if in.stdin != nil {
		_ = in.stdin.Close() // closing a pipe's writer cannot fail
	}
	in.env.Init.Handle(nil)
	r.mu.Lock()
	close(in.done)
	in.term()
	in.kill()
	clear(in.handlers)
	for _, unbind := range in.unbind {
		unbind()
	}
	in.unbind = nil
	if in.status.State != container.Running {
		r.mu.Unlock()
		return
	}
	in.status.State = container.Exited
	in.status.FinishedAt = r.opts.Clock.Now()
	in.status.ExitCode = code
	if in.forced != nil {
		in.status.ExitCode = in.forced.code
	}
	switch {
	case in.startFailure != "":
		in.status.StartedAt = time.Time{}
		in.status.ExitCode = exitStartError
		in.status.Reason = container.ReasonStartError
		in.status.Message = startErrorMessage(errors.New(in.startFailure))
		r.mu.Unlock()
		r.opts.Notify(uid)
		return
	case in.forced != nil && in.forced.oom:
		in.status.Reason = container.ReasonOOMKilled
	case in.status.ExitCode == 0:
		in.status.Reason = container.ReasonCompleted
	default:
		in.status.Reason = container.ReasonError
	}
	in.status.Message = terminationMessage(in)
	r.mu.Unlock()
	r.opts.Notify(uid)
}

// mountError is runc's error for a volume it could not mount, or nil when err is nil.
func mountError(err error, volume, dir string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("error mounting volume %q to rootfs at %q: %w", volume, dir, err)
}

// startErrorMessage is containerd's message for a container whose process could not start.
func startErrorMessage(err error) string {
	return fmt.Sprintf("failed to create containerd task: failed to create shim task: OCI runtime create failed: "+
		"runc create failed: unable to start container process: error during container init: %v: unknown", err)
}

// The kubelet's limits on a termination message (pkg/kubelet/container/runtime.go): what it reads
// of the file, and of the log's last lines when it falls back to them.
const (
	maxTerminationMessage        = 4 << 10
	maxTerminationMessageLogSize = 2 << 10
	terminationMessageLogLines   = 80
)

// terminationMessage reads the container's terminationMessagePath (its last 4 KiB), falling back
// to its log's last 80 lines (their last 2 KiB) on an error exit when the policy says so.
func terminationMessage(in *instance) string {
	var msg []byte
	if in.binary {
		msg = readHostTermination(in)
	} else {
		msg, _ = in.fs.ReadFile(terminationPath(&in.spec)) // no file is no message, as the kubelet reads it
	}
	if len(msg) > maxTerminationMessage {
		msg = msg[len(msg)-maxTerminationMessage:]
	}
	if len(msg) == 0 && in.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError && in.status.ExitCode != 0 {
		msg = in.logs.Tail(terminationMessageLogLines, maxTerminationMessageLogSize)
	}
	return string(msg)
}

func (r *Runtime) find(uid types.UID, id string) (*sandbox, *instance) {
	sb := r.pods[uid]
	if sb == nil {
		return nil, nil
	}
	for _, in := range sb.instances {
		if in.status.ID == id {
			return sb, in
		}
	}
	return sb, nil
}

// Stop sends SIGTERM to a running instance and SIGKILL after grace; it returns at once, and the
// exit is reported through Notify. Stopping a stopping or exited instance does nothing.
func (r *Runtime) Stop(uid types.UID, id string, grace time.Duration) {
	r.mu.Lock()
	_, in := r.find(uid, id)
	if in == nil || in.status.State != container.Running || in.stopping {
		r.mu.Unlock()
		return
	}
	in.stopping = true
	r.mu.Unlock()
	in.term()
	if grace <= 0 {
		in.kill()
		return
	}
	timer := r.opts.Clock.NewTimer(grace)
	r.procs.Add(1)
	go func() {
		defer r.procs.Done()
		defer timer.Stop()
		select {
		case <-timer.C():
			in.kill()
		case <-in.done:
		}
	}()
}

// Done returns a channel closed when the instance has exited; it is closed already for an
// instance the runtime does not have.
func (r *Runtime) Done(uid types.UID, id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, in := r.find(uid, id); in != nil {
		return in.done
	}
	closed := make(chan struct{})
	close(closed)
	return closed
}

// Remove deletes an exited instance; when a container has no instance left, its attempt count
// starts again at 0 (its logs are gone). Removing a running instance is refused.
func (r *Runtime) Remove(uid types.UID, id string) error {
	r.mu.Lock()
	defer r.opts.Notify(uid)
	defer r.mu.Unlock()
	sb, in := r.find(uid, id)
	if in == nil {
		return nil
	}
	if in.status.State == container.Running {
		return fmt.Errorf("runtime: container %s (%s) is running", in.status.Name, id)
	}
	sb.instances = slices.DeleteFunc(sb.instances, func(x *instance) bool { return x == in })
	if !slices.ContainsFunc(sb.instances, func(x *instance) bool { return x.status.Name == in.status.Name }) {
		delete(sb.attempts, in.status.Name)
	}
	return nil
}

// RemovePod kills every instance of the pod at once and forgets the sandbox.
func (r *Runtime) RemovePod(uid types.UID) {
	r.mu.Lock()
	sb := r.pods[uid]
	delete(r.pods, uid)
	if sb != nil {
		detach(sb)
	}
	r.mu.Unlock()
	if sb == nil {
		return
	}
	defer r.opts.Notify(uid)
	for _, in := range sb.instances {
		if in.kill != nil {
			in.kill()
		}
	}
	r.removeHostSandbox(uid)
}

// ErrNotRunning is returned by fault injection aimed at a container that is not running.
var ErrNotRunning = errors.New("container is not running")

// running returns the newest instance of the named container if it runs; r.mu is held.
func (r *Runtime) running(uid types.UID, name string) (*instance, error) {
	sb := r.pods[uid]
	if sb == nil {
		return nil, fmt.Errorf("pod %s has no sandbox: %w", uid, ErrNotRunning)
	}
	for i := len(sb.instances) - 1; i >= 0; i-- {
		if in := sb.instances[i]; in.status.Name == name {
			if in.status.State != container.Running {
				break
			}
			return in, nil
		}
	}
	return nil, fmt.Errorf("container %q: %w", name, ErrNotRunning)
}

// Exit makes the running process of the named container exit now with code; with oom, the
// runtime reports it as OOMKilled (exit 137).
func (r *Runtime) Exit(uid types.UID, name string, code int32, oom bool) error {
	r.mu.Lock()
	in, err := r.running(uid, name)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if oom {
		code = shell.ExitKilled
	}
	if in.forced == nil {
		in.forced = &forcedExit{code: code, oom: oom}
	}
	r.mu.Unlock()
	in.kill()
	return nil
}

// Exec runs argv in the named running container, as an exec probe does, and returns its exit
// code and combined output (its last execOutputLimit bytes).
func (r *Runtime) Exec(ctx context.Context, uid types.UID, name string, argv []string) (int, string, error) {
	out := &tailBuffer{max: execOutputLimit}
	code, err := r.ExecStream(ctx, uid, name, argv, Streams{Stdout: out, Stderr: out})
	return code, string(out.bytes()), err
}

// Streams are an exec's or an attach's standard streams; nil ones are not connected.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY: the streams are a terminal (stderr is then part of stdout).
	TTY bool
}

// ExecStream runs argv in the named running container with the given streams, like kubectl
// exec, and returns its exit code when it ends or ctx does.
func (r *Runtime) ExecStream(ctx context.Context, uid types.UID, name string, argv []string, s Streams) (int, error) {
	r.mu.Lock()
	in, err := r.running(uid, name)
	if err != nil {
		r.mu.Unlock()
		return 0, err
	}
	env := in.env
	binary, id := in.binary, in.status.ID
	r.mu.Unlock()
	if binary {
		return r.execBinary(ctx, uid, id, argv, env, s)
	}
	env.Stdin, env.Stdout, env.Stderr, env.TTY = s.Stdin, s.Stdout, s.Stderr, s.TTY
	if s.TTY {
		env.Stderr = s.Stdout
	}
	return shell.Exec(ctx, argv, env), nil
}

// Log returns the log of the named container's newest instance, or with previous of the one
// before it; false when there is none.
func (r *Runtime) Log(uid types.UID, name string, previous bool) (*logs.Log, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.pods[uid]
	if sb == nil {
		return nil, false
	}
	skip := 0
	if previous {
		skip = 1
	}
	for i := len(sb.instances) - 1; i >= 0; i-- {
		if in := sb.instances[i]; in.status.Name == name {
			if skip == 0 {
				return in.logs, true
			}
			skip--
		}
	}
	return nil, false
}

// LogOf returns the log of the pod's instance with containerID ("containerd://ID" or ID).
func (r *Runtime) LogOf(uid types.UID, containerID string) (*logs.Log, bool) {
	id := container.InstanceID(containerID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, in := r.find(uid, id); in != nil {
		return in.logs, true
	}
	return nil, false
}

// RunningContainers names the pod's containers that have a running instance.
func (r *Runtime) RunningContainers(uid types.UID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	if sb := r.pods[uid]; sb != nil {
		for _, in := range sb.instances {
			if in.status.State == container.Running && !slices.Contains(names, in.status.Name) {
				names = append(names, in.status.Name)
			}
		}
	}
	return names
}

// Attach connects to the named container's running process as kubectl attach does: its output
// from now on reaches the streams until it exits or ctx ends, and when the container has stdin
// (spec stdin: true) what the client sends reaches the process; with stdinOnce the process's
// stdin closes when the first attach's does.
func (r *Runtime) Attach(ctx context.Context, uid types.UID, name string, s Streams) error {
	r.mu.Lock()
	in, err := r.running(uid, name)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	stdin := in.stdin
	r.mu.Unlock()
	if s.Stdin != nil && stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, s.Stdin) // ends when either side closes
			if in.spec.StdinOnce {
				_ = stdin.Close() // closing a pipe's writer cannot fail
			}
		}()
	}
	follow := &corev1.PodLogOptions{Follow: true, TailLines: ptr.To[int64](0)}
	var wg sync.WaitGroup
	for stream, w := range map[string]io.Writer{logs.Stdout: s.Stdout, logs.Stderr: s.Stderr} {
		if w == nil || (s.TTY && stream == logs.Stderr) {
			continue
		}
		opts := follow.DeepCopy()
		if !s.TTY {
			opts.Stream = ptr.To(map[string]string{logs.Stdout: corev1.LogStreamStdout, logs.Stderr: corev1.LogStreamStderr}[stream])
		}
		wg.Go(func() { _ = in.logs.Read(ctx, w, opts) })
	}
	wg.Wait()
	return nil
}

// Logs returns what the instance has written to its current log file, without timestamps.
func (r *Runtime) Logs(uid types.UID, id string) string {
	r.mu.Lock()
	_, in := r.find(uid, id)
	r.mu.Unlock()
	if in == nil {
		return ""
	}
	var buf bytes.Buffer
	_ = in.logs.Read(context.Background(), &buf, nil) // reading into memory fails only on a canceled context, and this one is not
	return buf.String()
}

// PortForward connects stream to port of the pod's sandbox, as the kubelet's port-forward
// connects to localhost in the pod's network namespace, and copies until either side closes.
func (r *Runtime) PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error {
	r.mu.Lock()
	sb := r.pods[uid]
	var iface *network.Interface
	if sb != nil {
		iface = sb.iface
	}
	r.mu.Unlock()
	if iface == nil {
		return fmt.Errorf("pod %s has no network sandbox", uid)
	}
	if !validPort(port) {
		return fmt.Errorf("invalid port %d", port)
	}
	conn, err := iface.Dial(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s: %w", port, uid, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(conn, stream) // a forward's copy ends when either side closes
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite() // the peer may have gone
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(stream, conn) // a forward's copy ends when either side closes
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

func (r *Runtime) serve(uid types.UID, in *instance, port int32, h http.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.status.State != container.Running {
		return
	}
	in.handlers[port] = h
	if sb := r.pods[uid]; sb != nil && sb.iface != nil && validPort(port) {
		// Another container of the pod may hold the port: the probes still reach this handler,
		// as the first one to bind keeps the port for dials.
		if stop, err := sb.iface.Serve(uint16(port), h); err == nil {
			in.unbind = append(in.unbind, stop)
		}
	}
}

// handler returns what the pod serves on port, from any running container; r.mu is held.
func (r *Runtime) handler(uid types.UID, port int32) http.Handler {
	sb := r.pods[uid]
	if sb == nil {
		return nil
	}
	for _, in := range sb.instances {
		if h := in.handlers[port]; h != nil && in.status.State == container.Running {
			return h
		}
	}
	return nil
}

// Wait waits for every process and timer the runtime started; call it after RemovePod of every
// pod (or KillAll).
func (r *Runtime) Wait() { r.procs.Wait() }

// KillAll kills every process of every pod, as when the node's power goes; sandboxes stay.
func (r *Runtime) KillAll() {
	r.mu.Lock()
	var kills []context.CancelFunc
	for _, sb := range r.pods {
		for _, in := range sb.instances {
			if in.kill != nil {
				kills = append(kills, in.kill)
			}
		}
	}
	r.mu.Unlock()
	for _, k := range kills {
		k()
	}
}
