package controlplane

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Module paths whose versions in a release's modules are that release's versions.
const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdModule       = "go.etcd.io/etcd/server/v3"
)

// featureGatesFile is a release's feature-gate registry in its folder.
const featureGatesFile = "featuregates.json"

// releaseFiles are the modules hack/releases writes, one folder per minor: kubernetes.mod/.sum
// build the Kubernetes binaries and the thin mains, etcd.mod/.sum build etcd. mainFiles are the
// thin mains (mains/*.go), built inside the Kubernetes module.
var (
	//go:embed releases
	releaseFiles embed.FS
	//go:embed mains/*.go
	mainFiles embed.FS
)

// Release is one supported Kubernetes release: the versions restartbed builds for it and the
// modules it builds them from.
type Release struct {
	// Kubernetes is the release, e.g. v1.37.2.
	Kubernetes string
	// Etcd is the etcd the release ships and tests with (its build/dependencies.yaml), e.g. v3.7.0.
	Etcd string

	dir          string // folder in releaseFiles
	gates        Gates
	nodeFeatures []NodeFeature
}

// Minor is the release's minor version without the v, e.g. "1.37".
func (r Release) Minor() string { return strings.TrimPrefix(semver.MajorMinor(r.Kubernetes), "v") }

func (r Release) String() string { return fmt.Sprintf("Kubernetes %s (etcd %s)", r.Kubernetes, r.Etcd) }

var releases = mustLoadReleases()

func mustLoadReleases() []Release {
	rs, err := loadReleases(releaseFiles)
	if err != nil {
		panic(fmt.Sprintf("controlplane: embedded releases: %v", err))
	}
	return rs
}

// loadReleases reads every releases/<minor> folder, oldest first.
func loadReleases(fsys fs.FS) ([]Release, error) {
	dirs, err := fs.ReadDir(fsys, "releases")
	if err != nil {
		return nil, err
	}
	var rs []Release
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := path.Join("releases", d.Name())
		r := Release{dir: dir}
		for file, want := range map[string]struct {
			module string
			into   *string
		}{"kubernetes.mod": {kubernetesModule, &r.Kubernetes}, "etcd.mod": {etcdModule, &r.Etcd}} {
			data, err := fs.ReadFile(fsys, path.Join(dir, file))
			if err != nil {
				return nil, err
			}
			if *want.into, err = requiredVersion(data, want.module); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", dir, file, err)
			}
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, featureGatesFile))
		if err != nil {
			return nil, err
		}
		if r.gates, err = parseGates(data, path.Join(dir, featureGatesFile)); err != nil {
			return nil, err
		}
		if data, err = fs.ReadFile(fsys, path.Join(dir, nodeFeaturesFile)); err != nil {
			return nil, err
		}
		if r.nodeFeatures, err = parseNodeFeatures(data, path.Join(dir, nodeFeaturesFile)); err != nil {
			return nil, err
		}
		if got := "v" + r.Minor(); got != d.Name() {
			return nil, fmt.Errorf("%s holds Kubernetes %s", dir, r.Kubernetes)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("no release")
	}
	slices.SortFunc(rs, func(a, b Release) int { return semver.Compare(a.Kubernetes, b.Kubernetes) })
	return rs, nil
}

func requiredVersion(mod []byte, module string) (string, error) {
	f, err := modfile.ParseLax("go.mod", mod, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("it does not require %s", module)
}

// Releases lists the supported releases, oldest first.
func Releases() []Release { return slices.Clone(releases) }

// DefaultRelease is the newest supported release, which restartbed runs unless told otherwise.
func DefaultRelease() Release { return releases[len(releases)-1] }

// SupportedVersions names the supported releases for messages: "1.35 (v1.35.8), 1.36 (v1.36.4), 1.37 (v1.37.2)".
func SupportedVersions() string {
	parts := make([]string, len(releases))
	for i, r := range releases {
		parts[i] = fmt.Sprintf("%s (%s)", r.Minor(), r.Kubernetes)
	}
	return strings.Join(parts, ", ")
}

// ResolveRelease returns the release a user names: "" for the default, a minor ("1.36") or a
// whole version ("1.36.4", with or without the v). A patch is supported only where it is the
// one restartbed builds.
func ResolveRelease(version string) (Release, error) {
	if version == "" {
		return DefaultRelease(), nil
	}
	v := version
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !semver.IsValid(v) || semver.Prerelease(v) != "" || semver.Build(v) != "" {
		return Release{}, fmt.Errorf("Kubernetes version %q is not a version like 1.36 or 1.36.4; supported: %s", version, SupportedVersions()) //nolint:staticcheck // ST1005: a proper noun
	}
	whole := strings.Count(v, ".") == 2
	for _, r := range releases {
		if semver.MajorMinor(r.Kubernetes) != semver.MajorMinor(v) {
			continue
		}
		if whole && r.Kubernetes != v {
			return Release{}, fmt.Errorf("Kubernetes %s is not supported: restartbed builds %s of %s; supported: %s", //nolint:staticcheck // ST1005: a proper noun
				strings.TrimPrefix(v, "v"), r.Kubernetes, r.Minor(), SupportedVersions())
		}
		return r, nil
	}
	return Release{}, fmt.Errorf("Kubernetes %s is not supported; supported: %s", strings.TrimPrefix(v, "v"), SupportedVersions()) //nolint:staticcheck // ST1005: a proper noun
}

// ServerRelease is the release that emulates an apiserver of gitVersion (its /version, as
// "v1.36.2" or "v1.36.2-gke.1"): the supported release of its minor, and the version its nodes
// report, its major.minor.patch. An unsupported minor is an error that says so.
func ServerRelease(gitVersion string) (Release, string, error) {
	v := gitVersion
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !semver.IsValid(v) {
		return Release{}, "", fmt.Errorf("the apiserver's version %q is not a version", gitVersion)
	}
	r, err := ResolveRelease(semver.MajorMinor(v))
	if err != nil {
		return Release{}, "", fmt.Errorf("the apiserver runs Kubernetes %s: %w", gitVersion, err)
	}
	reported, _, _ := strings.Cut(strings.TrimSuffix(v, semver.Build(v)), "-")
	return r, reported, nil
}

// Key names one build of the release on this platform. It covers the modules and the thin
// mains, so a change of either never reuses an old build.
func (r Release) Key() string {
	h := sha256.New()
	for _, name := range []string{"kubernetes.mod", "kubernetes.sum", "etcd.mod", "etcd.sum"} {
		data, _ := fs.ReadFile(releaseFiles, path.Join(r.dir, name)) // embedded at build time: the name is one of the files listed above
		h.Write(data)
	}
	mains, _ := fs.ReadDir(mainFiles, "mains") // embedded at build time: the directory exists
	for _, m := range mains {
		data, _ := fs.ReadFile(mainFiles, path.Join("mains", m.Name())) // embedded: read from its own listing
		h.Write([]byte(m.Name()))
		h.Write(data)
	}
	return fmt.Sprintf("kubernetes-%s-etcd-%s-%s-%s-%s", r.Kubernetes, r.Etcd, runtime.GOOS, runtime.GOARCH, hex.EncodeToString(h.Sum(nil))[:8])
}

func (r Release) file(name string) []byte {
	data, err := fs.ReadFile(releaseFiles, path.Join(r.dir, name))
	if err != nil {
		panic(fmt.Sprintf("controlplane: %s/%s: %v", r.dir, name, err)) // checked by loadReleases
	}
	return data
}
