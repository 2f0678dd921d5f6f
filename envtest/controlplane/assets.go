package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/utils/clock"
)

// Binary names inside an assets directory. kube-apiserver and etcd are named as
// controller-runtime's envtest expects them, so the directory also serves as KUBEBUILDER_ASSETS.
const (
	KubeAPIServerBinary         = "kube-apiserver"
	KubeControllerManagerBinary = "kube-controller-manager"
	KubeSchedulerBinary         = "kube-scheduler"
	EtcdBinary                  = "etcd"
)

// Binaries are the programs of a control plane, in the order they start.
var Binaries = []string{EtcdBinary, KubeAPIServerBinary, KubeControllerManagerBinary, KubeSchedulerBinary}

// Assets is a resolved set of control-plane binaries of one release.
type Assets struct {
	// Release is the release the binaries were built from.
	Release Release
	// Dir holds the binaries.
	Dir string
	// Source says where Dir was found: "user cache" or "built".
	Source string
	// Guard is the path of the guard program (reaper_main.go), or empty where the platform has
	// no parent-death signal.
	Guard string
}

// Path is the path of one of the Binaries.
func (a Assets) Path(binary string) string { return filepath.Join(a.Dir, binary) }

// Options tune Ensure.
type Options struct {
	// Progress receives one line when a build starts or waits for another process's build, one
	// per binary built, and one when it ends. Nil means os.Stderr.
	Progress io.Writer
	// CacheDir overrides the user cache directory (default: os.UserCacheDir()/restartbed).
	CacheDir string
	// Clock times the build for the progress lines (default: the real clock).
	Clock clock.PassiveClock
}

func (o *Options) complete() error {
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("finding the user cache directory for the control-plane binaries: %w (set XDG_CACHE_HOME or HOME)", err)
		}
		o.CacheDir = filepath.Join(dir, "restartbed")
	}
	return nil
}

// Dir is where the release's binaries live in the cache.
func (o Options) dir(r Release) string { return filepath.Join(o.CacheDir, "controlplane", r.Key()) }

// Ensure returns the release's control-plane binaries, building them into the user cache first
// when the cache does not have them. Parallel callers build once.
func Ensure(r Release, opts Options) (Assets, error) {
	if err := opts.complete(); err != nil {
		return Assets{}, err
	}
	dir := opts.dir(r)
	assets := Assets{Release: r, Dir: dir, Source: "user cache"}
	if complete(dir) != nil {
		if err := buildOnce(opts, dir, r.String(), buildHint, func(o Options, scratch, out string) error {
			return buildRelease(o, r, scratch, out)
		}); err != nil {
			return Assets{}, err
		}
		assets.Source = "built"
	}
	var err error
	if assets.Guard, err = ensureGuard(opts); err != nil {
		return Assets{}, err
	}
	return assets, nil
}

// buildHint tells a user waiting for the first build what to expect.
const buildHint = " (once per release; about fifteen minutes on 2 cores)"

// complete reports whether dir holds every binary as an executable file.
func complete(dir string) error {
	var errs []error
	for _, name := range Binaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("no %s", name))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", name))
		}
	}
	return errors.Join(errs...)
}

// Guarded lays out dir so that starting dir/NAME runs the real binary NAME under the guard,
// which dies with its parent, and returns those paths by binary name. Without a guard it returns
// the real paths.
func (a Assets) Guarded(dir string) (map[string]string, error) {
	paths := make(map[string]string, len(Binaries))
	if a.Guard == "" {
		for _, name := range Binaries {
			paths[name] = a.Path(name)
		}
		return paths, nil
	}
	real := filepath.Join(dir, ".real")
	if err := os.MkdirAll(real, 0o755); err != nil { // dir too
		return nil, fmt.Errorf("preparing the guarded control plane: %w", err)
	}
	for _, name := range Binaries {
		if err := os.Symlink(a.Path(name), filepath.Join(real, name)); err != nil {
			return nil, fmt.Errorf("preparing the guarded control plane: %w", err)
		}
		if err := os.Symlink(a.Guard, filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("preparing the guarded control plane: %w", err)
		}
		paths[name] = filepath.Join(dir, name)
	}
	return paths, nil
}
