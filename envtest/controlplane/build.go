package controlplane

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/semver"
)

//go:embed reaper_main.go
var guardSource []byte

// buildFunc builds into out, using scratch as its working directory.
type buildFunc func(opts Options, scratch, out string) error

// buildOnce makes dir hold what build produces, exactly once across processes: it takes a file
// lock next to dir, re-checks, builds into a temporary sibling and renames it into place, so a
// reader never sees half a build and a crash leaves nothing that looks finished.
func buildOnce(opts Options, dir, what, hint string, build buildFunc) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating the cache directory for %s: %w", what, err)
	}
	unlock, err := lock(opts, dir+".lock", what)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(dir); err == nil {
		return nil // another process built it while we waited
	}
	// Holding the lock, no other build is running: any scratch directory is from a build that
	// failed (kept for inspection until now) or was killed.
	stale, _ := filepath.Glob(dir + ".build-*") // only a malformed pattern fails, and this one is constant
	for _, s := range stale {
		_ = os.RemoveAll(s) // best effort: the next build tries again
	}

	scratch, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".build-")
	if err != nil {
		return fmt.Errorf("creating a build directory for %s: %w", what, err)
	}
	out := filepath.Join(scratch, "out")
	fmt.Fprintf(opts.Progress, "restartbed: building %s from source into %s%s\n", what, dir, hint)
	start := opts.Clock.Now()
	if err := build(opts, scratch, out); err != nil {
		return fmt.Errorf("building %s failed (the build directory %s is kept for inspection until the next build; "+
			"retry with `restartbed assets`, see docs/control-plane.md): %w",
			what, scratch, err)
	}
	if err := os.Rename(out, dir); err != nil {
		return fmt.Errorf("moving the build of %s into place: %w", what, err)
	}
	_ = os.RemoveAll(scratch) // best effort: the next build removes stale scratch directories
	fmt.Fprintf(opts.Progress, "restartbed: built %s in %s\n", what, opts.Clock.Since(start).Round(time.Second))
	return nil
}

// lock takes an exclusive flock on path, saying so when it has to wait for another process.
func lock(opts Options, path, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock for %s: %w", what, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		fmt.Fprintf(opts.Progress, "restartbed: waiting for another process that is building %s (lock %s)\n", what, path)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil { // the blocking lock's error too: it used to be dropped with the if's own err
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file releases the lock anyway
		f.Close()
	}, nil
}

// buildRelease builds the release's binaries into out: kube-apiserver, kube-scheduler and the
// thin mains from the release's Kubernetes module, in one go build so that they share its work;
// etcd from the release's etcd module; then the feature-gate registry, by running its main.
func buildRelease(opts Options, r Release, scratch, out string) error {
	kube := filepath.Join(scratch, "kubernetes")
	files := map[string][]byte{"go.mod": r.file("kubernetes.mod"), "go.sum": r.file("kubernetes.sum")}
	mains, err := fs.ReadDir(mainFiles, "mains")
	if err != nil {
		return err
	}
	targets := []string{kubernetesModule + "/cmd/kube-apiserver", kubernetesModule + "/cmd/kube-scheduler"}
	for _, m := range mains {
		name := strings.TrimSuffix(m.Name(), ".go")
		src, err := fs.ReadFile(mainFiles, "mains/"+m.Name())
		if err != nil {
			return err
		}
		// The ignore tag keeps the mains out of this package; in the scratch module each is a command.
		files[filepath.Join(name, "main.go")] = []byte(strings.Replace(string(src), "//go:build ignore\n", "", 1))
		targets = append(targets, "./"+name)
	}
	if err := writeFiles(kube, files); err != nil {
		return err
	}
	start := opts.Clock.Now()
	if err := goBuild(opts, kube, out+string(filepath.Separator), versionFlags(r.Kubernetes), targets...); err != nil {
		return err
	}
	fmt.Fprintf(opts.Progress, "restartbed: built kube-apiserver, kube-controller-manager and kube-scheduler %s in %s\n",
		r.Kubernetes, opts.Clock.Since(start).Round(time.Second))

	etcd := filepath.Join(scratch, "etcd")
	if err := writeFiles(etcd, map[string][]byte{"go.mod": r.file("etcd.mod"), "go.sum": r.file("etcd.sum")}); err != nil {
		return err
	}
	start = opts.Clock.Now()
	if err := goBuild(opts, etcd, filepath.Join(out, EtcdBinary), "", etcdModule); err != nil {
		return err
	}
	fmt.Fprintf(opts.Progress, "restartbed: built etcd %s in %s\n", r.Etcd, opts.Clock.Since(start).Round(time.Second))

	return nil
}

// versionFlags stamp the binaries with their release, as upstream's build does
// (hack/lib/version.sh), so /version, --version and the components' logs name it.
func versionFlags(v string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(semver.MajorMinor(v), "v"), ".")
	flags := []string{"-s", "-w"} // as upstream's release builds (hack/lib/golang.sh)
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X "+pkg+".gitVersion="+v,
			"-X "+pkg+".gitMajor="+major,
			"-X "+pkg+".gitMinor="+minor,
			"-X "+pkg+".gitTreeState=clean",
			"-X "+pkg+".buildDate=1970-01-01T00:00:00Z")
	}
	return strings.Join(flags, " ")
}

func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildMain builds a main package of one file that needs nothing but the standard library.
func buildMain(source []byte, binary string) buildFunc {
	return func(opts Options, scratch, out string) error {
		src := filepath.Join(scratch, "main.go")
		if err := os.WriteFile(src, source, 0o644); err != nil {
			return err
		}
		return goBuild(opts, scratch, filepath.Join(out, binary), "", src)
	}
}

// goBuild runs the Go toolchain that built this program, isolated from the caller's module,
// workspace and flags, without cgo, and never fetching a toolchain.
func goBuild(opts Options, dir, output, ldflags string, targets ...string) error {
	args := []string{"build", "-trimpath", "-o", output}
	if ldflags != "" {
		args = append(args, "-ldflags="+ldflags)
	}
	cmd := exec.Command(goTool(), append(args, targets...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	var tail bytes.Buffer
	cmd.Stdout = &tail
	cmd.Stderr = &tail
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(targets, " "), err, lastLines(tail.String(), 30))
	}
	return nil
}

// goTool finds `go`: on PATH, else next to the standard library this program was built with
// (a test binary run without go on PATH), if that is still there.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: no PATH to ask; the build's own root is the only hint left
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// ensureGuard returns the guard binary, building it once per source version. It is empty where
// the kernel has no parent-death signal.
func ensureGuard(opts Options) (string, error) {
	if runtime.GOOS != "linux" {
		return "", nil
	}
	return EnsureTool(opts, "guard", "the process guard", guardSource)
}

// EnsureTool returns restartbed's helper program name, built from source (a main package of
// one file that needs nothing but the standard library) once per source version into the
// cache, as restartbed-NAME; what says what it is, for the progress line.
func EnsureTool(opts Options, name, what string, source []byte) (string, error) {
	if err := opts.complete(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(source)
	dir := filepath.Join(opts.CacheDir, name, hex.EncodeToString(sum[:6])+"-"+runtime.GOARCH)
	binary := "restartbed-" + name
	if err := buildOnce(opts, dir, what, "", buildMain(source, binary)); err != nil {
		return "", err
	}
	return filepath.Join(dir, binary), nil
}
