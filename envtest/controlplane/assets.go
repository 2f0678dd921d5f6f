package controlplane

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/mod/modfile"
	"k8s.io/utils/clock"
)

// Module paths whose versions in the tools module are the control plane's versions.
const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdModule       = "go.etcd.io/etcd/server/v3"
)

// Binary names inside an assets directory, as controller-runtime's envtest expects them.
const (
	KubeAPIServerBinary = "kube-apiserver"
	EtcdBinary          = "etcd"
)

// AssetsEnv is the variable through which a user points restartbed (and controller-runtime's
// envtest) at a directory of prebuilt binaries.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// toolsMod and toolsSum are copies of hack/tools/go.mod and go.sum (make generate writes them;
// TestEmbeddedToolsModuleIsCurrent fails when they drift). The build runs in a scratch module
// made of them, so a project that imports restartbed builds exactly the same binaries.
var (
	//go:embed tools.mod
	toolsMod []byte
	//go:embed tools.sum
	toolsSum []byte
)

// Versions are the control plane's versions, read from the tools module.
type Versions struct {
	Kubernetes string // e.g. v1.35.4
	Etcd       string // e.g. v3.6.5
}

var versions = mustParseVersions(toolsMod)

func mustParseVersions(mod []byte) Versions {
	v, err := parseVersions(mod)
	if err != nil {
		panic(fmt.Sprintf("controlplane: embedded tools.mod: %v", err))
	}
	return v
}

func parseVersions(mod []byte) (Versions, error) {
	f, err := modfile.ParseLax("tools.mod", mod, nil)
	if err != nil {
		return Versions{}, err
	}
	var v Versions
	for _, r := range f.Require {
		switch r.Mod.Path {
		case kubernetesModule:
			v.Kubernetes = r.Mod.Version
		case etcdModule:
			v.Etcd = r.Mod.Version
		}
	}
	if v.Kubernetes == "" || v.Etcd == "" {
		return Versions{}, fmt.Errorf("it must require both %s and %s", kubernetesModule, etcdModule)
	}
	return v, nil
}

// CurrentVersions returns the versions restartbed runs.
func CurrentVersions() Versions { return versions }

// Key names one build of the control plane: the versions and the platform. Cached binaries live
// in a directory of that name, so a version change never reuses an old build.
func (v Versions) Key() string {
	return fmt.Sprintf("kube-apiserver-%s-etcd-%s-%s-%s", v.Kubernetes, v.Etcd, runtime.GOOS, runtime.GOARCH)
}

// Assets is a resolved set of control-plane binaries.
type Assets struct {
	// Dir holds kube-apiserver and etcd.
	Dir string
	// Source says where Dir was found: "KUBEBUILDER_ASSETS", "repository bin/", "user cache" or
	// "built".
	Source string
	// Guard is the path of the guard program (reaper_main.go), or empty where the platform has
	// no parent-death signal.
	Guard string
}

// KubeAPIServer is the path of the kube-apiserver binary.
func (a Assets) KubeAPIServer() string { return filepath.Join(a.Dir, KubeAPIServerBinary) }

// Etcd is the path of the etcd binary.
func (a Assets) Etcd() string { return filepath.Join(a.Dir, EtcdBinary) }

// Options tune Ensure.
type Options struct {
	// Progress receives one line when a build starts or waits for another process's build, and
	// one when it ends. Nil means os.Stderr.
	Progress io.Writer
	// CacheDir overrides the user cache directory (default: os.UserCacheDir()/restartbed).
	CacheDir string
	// SearchFrom is where the search for the repository's bin/ starts (default: the working
	// directory). Only a directory inside a restartbed checkout has one.
	SearchFrom string
	// Clock times the build for the progress line (default: the real clock).
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
	if o.SearchFrom == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("finding the working directory: %w", err)
		}
		o.SearchFrom = wd
	}
	return nil
}

// Ensure returns the control-plane binaries, building them first if no location has them.
// A directory named by KUBEBUILDER_ASSETS must hold both binaries: a wrong setting is an error,
// never silently replaced by another build.
func Ensure(opts Options) (Assets, error) {
	if err := opts.complete(); err != nil {
		return Assets{}, err
	}
	assets, err := find(opts)
	if err != nil {
		return Assets{}, err
	}
	if assets.Dir == "" {
		dir := filepath.Join(opts.CacheDir, "controlplane", versions.Key())
		if err := buildOnce(opts, dir, versions.String(), " (once; several minutes on 2 cores)", buildControlPlane); err != nil {
			return Assets{}, err
		}
		assets = Assets{Dir: dir, Source: "built"}
	}
	if assets.Guard, err = ensureGuard(opts); err != nil {
		return Assets{}, err
	}
	return assets, nil
}

func (v Versions) String() string {
	return fmt.Sprintf("kube-apiserver %s and etcd %s", v.Kubernetes, v.Etcd)
}

// find looks in the three places in order and returns an empty Assets when none has the binaries.
func find(opts Options) (Assets, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		if err := complete(dir); err != nil {
			return Assets{}, fmt.Errorf("%s=%s: %w; unset it to let restartbed build %s, or see docs/control-plane.md",
				AssetsEnv, dir, err, versions)
		}
		return Assets{Dir: dir, Source: AssetsEnv}, nil
	}
	if root := repositoryRoot(opts.SearchFrom); root != "" {
		dir := filepath.Join(root, "bin", "controlplane", versions.Key())
		if complete(dir) == nil {
			return Assets{Dir: dir, Source: "repository bin/"}, nil
		}
	}
	dir := filepath.Join(opts.CacheDir, "controlplane", versions.Key())
	if complete(dir) == nil {
		return Assets{Dir: dir, Source: "user cache"}, nil
	}
	return Assets{}, nil
}

// complete reports whether dir holds both binaries as executable files.
func complete(dir string) error {
	var errs []error
	for _, name := range []string{KubeAPIServerBinary, EtcdBinary} {
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

// repositoryRoot walks up from dir to the root of a restartbed checkout, or returns "".
func repositoryRoot(dir string) string {
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfile.ModulePath(data) == "github.com/restartbed/restartbed" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Guarded lays out dir so that starting dir/kube-apiserver or dir/etcd runs the real binary
// under the guard, which dies with its parent. Without a guard it returns the real paths.
func (a Assets) Guarded(dir string) (kubeAPIServer, etcd string, err error) {
	if a.Guard == "" {
		return a.KubeAPIServer(), a.Etcd(), nil
	}
	real := filepath.Join(dir, ".real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		return "", "", fmt.Errorf("preparing the guarded control plane: %w", err)
	}
	for _, name := range []string{KubeAPIServerBinary, EtcdBinary} {
		if err := os.Symlink(filepath.Join(a.Dir, name), filepath.Join(real, name)); err != nil {
			return "", "", fmt.Errorf("preparing the guarded control plane: %w", err)
		}
		if err := os.Symlink(a.Guard, filepath.Join(dir, name)); err != nil {
			return "", "", fmt.Errorf("preparing the guarded control plane: %w", err)
		}
	}
	return filepath.Join(dir, KubeAPIServerBinary), filepath.Join(dir, EtcdBinary), nil
}
