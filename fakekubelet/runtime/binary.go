package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/logs"
	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/program"
	"github.com/restartbed/restartbed/fakekubelet/shell"
	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// Where a pod's files go in its host sandbox's files directory: each volume's content (copied from
// the pod's volumes, package vfs), the kubelet's name files, and each instance's termination-log.
const (
	hostVolumes     = "volumes"
	hostNames       = "names"
	hostTermination = "termination"
	// serviceAccountVolumeName holds restartbed's own service-account files where the apiserver
	// gave the pod no token volume.
	serviceAccountVolumeName = ".serviceaccount"
)

// runBinary runs a host executable as the instance's process in the pod's host sandbox and
// returns its exit code: SIGTERM when term is done, SIGKILL when kill is. When it cannot start,
// the instance gets containerd's StartError with the reason, as a missing entrypoint would.
func (r *Runtime) runBinary(term, kill context.Context, pod *corev1.Pod, in *instance, binary string, env []string) int {
	box, mounts, err := r.hostSandbox(term, pod, in)
	var p *hostproc.Process
	if err == nil {
		argv := []string{binary}
		if len(in.spec.Command) > 1 {
			argv = append(argv, expandArgs(in.spec.Command[1:], env)...)
		}
		argv = append(argv, expandArgs(in.spec.Args, env)...)
		p, err = box.Start(term, hostproc.ProcessSpec{ID: in.status.ID, Binary: binary, Argv: argv, Env: env, Dir: in.spec.WorkingDir,
			Mounts: mounts, Stdout: in.logs.Writer(logs.Stdout), Stderr: in.logs.Writer(logs.Stderr)})
	}
	if err != nil {
		r.mu.Lock()
		in.startFailure = err.Error()
		r.mu.Unlock()
		return exitStartError
	}
	select {
	case <-p.Done():
		return p.ExitCode()
	case <-term.Done():
		_ = p.Signal(syscall.SIGTERM) // fails only when the process has already exited
		select {
		case <-p.Done():
			return p.ExitCode()
		case <-kill.Done():
		}
	case <-kill.Done(): // SIGKILL without SIGTERM: a node that lost power, a forced exit
	}
	_ = p.Signal(syscall.SIGKILL) // fails only when the process has already exited
	return p.ExitCode()
}

// hostSandbox returns the pod's host sandbox, started when it has none, with the instance's
// files written into it, and the mounts that put them at the container's paths.
func (r *Runtime) hostSandbox(ctx context.Context, pod *corev1.Pod, in *instance) (*hostproc.Sandbox, []hostproc.Mount, error) {
	if r.opts.Host == nil {
		return nil, nil, program.ErrHostBinariesNotAllowed
	}
	r.mu.Lock()
	sb := r.pods[pod.UID]
	r.mu.Unlock()
	if sb == nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no sandbox", pod.Namespace, pod.Name)
	}
	ip, err := netip.ParseAddr(sb.ip)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no IP", pod.Namespace, pod.Name)
	}
	spec := hostproc.SandboxSpec{Hostname: sb.hostname, IP: ip, APIServer: apiServerAddress(in.env.Vars)}
	if r.opts.Network != nil {
		spec.Dial = func(ctx context.Context, address string) (net.Conn, error) {
			iface := r.ifaceOf(sb)
			if iface == nil {
				return nil, fmt.Errorf("pod %s/%s is off the network", pod.Namespace, pod.Name)
			}
			return iface.Dial(ctx, address)
		}
		spec.DNS, spec.AnswerDNS = r.opts.Network.DNS(), r.opts.Network.AnswerDNS
		if r.opts.ControlPlane.IsValid() {
			spec.APIServerReachable = func() bool {
				iface := r.ifaceOf(sb)
				return iface != nil && iface.Reaches(r.opts.ControlPlane)
			}
		}
	}
	box, err := r.opts.Host.Sandbox(string(pod.UID), spec)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	if sb.iface != nil {
		sb.iface.SetUplink(box.Dial)
	}
	r.mu.Unlock()
	mounts, err := r.writeHostFiles(box, sb, in)
	return box, mounts, err
}

// ifaceOf is the sandbox's address on the network now; nil once it stopped (or without one).
func (r *Runtime) ifaceOf(sb *sandbox) *network.Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sb.iface
}

// apiServerAddress is the kubernetes Service's address the container's environment names; the
// zero value without one.
func apiServerAddress(env []string) netip.AddrPort {
	var host, port string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "KUBERNETES_SERVICE_HOST="); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(kv, "KUBERNETES_SERVICE_PORT="); ok {
			port = v
		}
	}
	ap, _ := netip.ParseAddrPort(host + ":" + port) // the zero value when the env has no Service: no apiserver to reach
	return ap
}

// writeHostFiles copies the volumes the container mounts into the sandbox (a volume that does
// not project its source is copied once, so what one of the pod's binaries writes stays), writes
// the name files and an empty termination-log, and returns the mounts.
func (r *Runtime) writeHostFiles(box *hostproc.Sandbox, sb *sandbox, in *instance) ([]hostproc.Mount, error) {
	files := box.FilesDir()
	var mounts []hostproc.Mount
	saMounted := false
	for _, m := range in.spec.VolumeMounts {
		r.mu.Lock()
		vol, projected := sb.volumes[m.Name], sb.projected[m.Name]
		r.mu.Unlock()
		if vol == nil {
			continue
		}
		dir := path.Join(hostVolumes, m.Name)
		if err := copyVolume(vol.FS(sb.fs), filepath.Join(files, dir), !projected); err != nil {
			return nil, fmt.Errorf("volume %q: %w", m.Name, err)
		}
		mounts = append(mounts, hostproc.Mount{Source: path.Join(dir, m.SubPath), Target: m.MountPath, ReadOnly: m.ReadOnly || projected})
		saMounted = saMounted || path.Clean(m.MountPath) == ServiceAccountDir
	}
	if sb.serviceAccount != nil && !saMounted {
		dir := path.Join(hostVolumes, serviceAccountVolumeName)
		if err := copyVolume(sb.serviceAccount.FS(sb.fs), filepath.Join(files, dir), false); err != nil {
			return nil, fmt.Errorf("the service-account files: %w", err)
		}
		mounts = append(mounts, hostproc.Mount{Source: dir, Target: ServiceAccountDir, ReadOnly: true})
	}
	for _, p := range slices.Sorted(maps.Keys(sb.names)) {
		if covered(p, in.spec.VolumeMounts) {
			continue
		}
		src := path.Join(hostNames, path.Base(p))
		if err := writeFile(filepath.Join(files, src), sb.names[p], 0o644); err != nil {
			return nil, err
		}
		mounts = append(mounts, hostproc.Mount{Source: src, Target: p})
	}
	term := terminationPath(&in.spec)
	src := path.Join(hostTermination, in.status.ID)
	if err := writeFile(filepath.Join(files, src), nil, 0o666); err != nil {
		return nil, err
	}
	mounts = append(mounts, hostproc.Mount{Source: src, Target: term})
	r.mu.Lock()
	in.hostTermination = filepath.Join(files, src)
	r.mu.Unlock()
	return mounts, nil
}

// refreshHostFiles copies a projected volume just refreshed into the pod's host sandbox again,
// when a binary of the pod mounts it, so that updates (a rotated token, a changed ConfigMap)
// reach the binaries as they reach the kubelet's mounts.
func (r *Runtime) refreshHostFiles(sb *sandbox, name string, vol *vfs.Volume) error {
	if r.opts.Host == nil {
		return nil
	}
	box := r.opts.Host.Lookup(string(sb.uid))
	if box == nil {
		return nil
	}
	dst := filepath.Join(box.FilesDir(), hostVolumes, name)
	if _, err := os.Stat(dst); err != nil {
		return nil // no binary of the pod mounts it
	}
	if err := copyVolume(vol.FS(sb.fs), dst, false); err != nil {
		return fmt.Errorf("volume %q into the host sandbox of pod %s: %w", name, sb.uid, err)
	}
	return nil
}

// copyVolume copies a volume's files into dir; with once, only when dir does not exist yet.
func copyVolume(src *vfs.FS, dir string, once bool) error {
	if _, err := os.Stat(dir); err == nil && once {
		return nil
	}
	return copyTree(src, "/", dir)
}

func copyTree(src *vfs.FS, from, to string) error {
	fi, err := src.Stat(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, fi.Mode().Perm()|0o700); err != nil {
		return err
	}
	entries, err := src.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p, dst := path.Join(from, e.Name()), filepath.Join(to, e.Name())
		if e.IsDir() {
			if err := copyTree(src, p, dst); err != nil {
				return err
			}
			continue
		}
		data, err := src.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if err := writeFile(dst, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces a file whole (a rename), so a reader never sees half of it.
func writeFile(name string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	tmp := name + ".restartbed-new"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil { // past the umask
		return err
	}
	return os.Rename(tmp, name)
}

// covered reports whether one of the mounts covers p, where the kubelet then writes no name file.
func covered(p string, mounts []corev1.VolumeMount) bool {
	return slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool {
		mp := path.Clean(m.MountPath)
		return mp == p || strings.HasPrefix(p, mp+"/")
	})
}

func terminationPath(c *corev1.Container) string {
	if c.TerminationMessagePath != "" {
		return c.TerminationMessagePath
	}
	return corev1.TerminationMessagePathDefault
}

// readHostTermination reads what a binary wrote to its termination-log; "" without one.
func readHostTermination(in *instance) []byte {
	if in.hostTermination == "" {
		return nil
	}
	data, _ := os.ReadFile(in.hostTermination) // no file is no message, as the kubelet reads it
	return data
}

// removeHostSandbox ends the pod's host sandbox, if it has one.
func (r *Runtime) removeHostSandbox(uid types.UID) {
	if r.opts.Host != nil {
		r.opts.Host.Remove(string(uid))
	}
}

// execBinary runs argv in a running host binary's container, through its sandbox, with the
// container's environment and working directory. A TTY is not emulated: the streams are pipes.
func (r *Runtime) execBinary(ctx context.Context, uid types.UID, id string, argv []string, env shell.Env, s Streams) (int, error) {
	var box *hostproc.Sandbox
	if r.opts.Host != nil {
		box = r.opts.Host.Lookup(string(uid))
	}
	if box == nil {
		return 0, fmt.Errorf("container %s has no sandbox: %w", id, ErrNotRunning)
	}
	stderr := s.Stderr
	if s.TTY {
		stderr = s.Stdout
	}
	return box.Exec(ctx, hostproc.ExecSpec{Container: id, Argv: argv, Env: env.Vars, Dir: env.Dir, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: stderr})
}
