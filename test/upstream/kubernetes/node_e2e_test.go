package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
)

var (
	updateDocs = flag.Bool("update-docs", false, "write this run's table into docs/upstream-tests.md")
	focus      = flag.String("focus", "", "run only the specs whose text matches this regexp (ginkgo --focus), log each failure whole, "+
		"and check nothing: for diagnosing a spec")
)

// parallelism is how many ginkgo processes run specs at once. The specs mostly wait on
// containers' sleeps, so more processes than cores keep the run short; but the three releases'
// parallel specs run at once, and with eight processes each they kept both cores busy for their
// seven to ten minutes, where specs that bound a pod's deletion by 5 s need the cores to spare.
const parallelism = 6

// specFiles are test/e2e_node's test files whose specs run, on every release.
var specFiles = []string{"container_lifecycle_test.go", "restart_all_containers_test.go", "container_restart_test.go"}

// helperFiles are test/e2e_node's test files whose functions the specs call; their own specs are
// not run.
var helperFiles = []string{"critical_pod_test.go", "deleted_pods_test.go", "device_manager_test.go", "device_plugin_test.go", "mirror_pod_test.go"}

// suite says what a release's run needs beyond specFiles and helperFiles.
type suite struct {
	// restartRules is the --focus-file pattern of the file that holds the restart-rule and
	// RestartAllContainers specs.
	restartRules string
	// imports are the packages the suite file imports for their side effects in this release,
	// beside those of testdata/restartbed_suite_test.go (gomega's formatting moved in 1.37).
	imports []string
	// outOfScope matches the specs of the focus files that are not about container lifecycle,
	// restart rules or RestartAllContainers: they are neither run nor listed.
	outOfScope string
	// criClient is how the release's test/e2e_node/util.go opens the node's CRI clients, as its
	// own suite file calls it to put the CRI proxy in front of them (the context came in 1.36).
	criClient string
	// fixes are upstream's later fixes of races in the release's own specs, applied to the copy
	// that is built.
	fixes []specFix
}

// specFix is a change upstream made to one of its specs after the release, to be made to the
// release's copy: in file, the first old after the text after becomes new. A fix that no longer
// finds its text fails the build, so that it is looked at again with each new patch release.
type specFix struct {
	file, after, old, new string
	// upstream names the upstream change, and why.
	upstream string
}

// apply makes the fix in data.
func (f specFix) apply(data []byte) ([]byte, error) {
	text := string(data)
	at := strings.Index(text, f.after)
	if at < 0 {
		return nil, fmt.Errorf("%s: %q not found (fix: %s)", f.file, f.after, f.upstream)
	}
	at += len(f.after)
	i := strings.Index(text[at:], f.old)
	if i < 0 {
		return nil, fmt.Errorf("%s: %q not found after %q (fix: %s)", f.file, f.old, f.after, f.upstream)
	}
	return []byte(text[:at+i] + f.new + text[at+i+len(f.old):]), nil
}

// notReadyEveryContainer is kubernetes/kubernetes#141423, merged after v1.37.2: the spec that makes
// every container of a pod NotReady before a kubelet restart waited only for the pod's Ready
// condition, which turns false with the first container's failure, and then checked that every
// container's ready flag was false. The second container's probe may fail a period later (its
// marker is removed after the first's), on a node as on restartbed; the fix waits for every
// container's status.
var notReadyEveryContainer = specFix{
	file:  "container_lifecycle_test.go",
	after: `ginkgo.By("Removing the readiness marker file from all containers to make the pod NotReady")`,
	old: "\t\t\t\t\t\tif cond.Type == v1.PodReady && cond.Status == v1.ConditionFalse {\n" +
		"\t\t\t\t\t\t\treturn true, nil\n",
	new: "\t\t\t\t\t\tif cond.Type == v1.PodReady && cond.Status == v1.ConditionFalse {\n" +
		"\t\t\t\t\t\t\tfor _, cs := range p.Status.ContainerStatuses {\n" +
		"\t\t\t\t\t\t\t\tif cs.Ready {\n" +
		"\t\t\t\t\t\t\t\t\treturn false, nil\n" +
		"\t\t\t\t\t\t\t\t}\n" +
		"\t\t\t\t\t\t\t}\n" +
		"\t\t\t\t\t\t\treturn true, nil\n",
	upstream: "kubernetes/kubernetes#141423, wait for every container's Ready=false before the kubelet restart",
}

// focus are the ginkgo --focus-file patterns: the spec files and the restart-rule file.
func (s suite) focus() []string {
	var out []string
	for _, f := range specFiles {
		out = append(out, "/"+regexp.QuoteMeta(f)+"$")
	}
	return append(out, s.restartRules)
}

// suites are what each release's node e2e run needs. The restart-rule specs moved from
// test/e2e/node/pods.go, which the node suite does not link, to
// test/e2e/common/node/container_restart_policy.go in 1.36.
var suites = map[string]suite{
	"1.35": {
		restartRules: `/e2e/node/pods\.go$`,
		imports:      []string{"k8s.io/kubernetes/test/utils/format", "k8s.io/kubernetes/test/e2e/node"},
		// test/e2e/node/pods.go holds the restart-rule specs ("Pod Extended (...)") beside
		// general pod specs ("Pods Extended ...").
		outOfScope: `Pods Extended`,
		criClient:  "getCRIClient()",
	},
	"1.36": {restartRules: `/common/node/container_restart_policy\.go$`, imports: []string{"k8s.io/kubernetes/test/utils/format"}, criClient: "getCRIClient(ctx)"},
	"1.37": {restartRules: `/common/node/container_restart_policy\.go$`, imports: []string{"k8s.io/kubernetes/test/utils/ktesting/format"}, criClient: "getCRIClient(ctx)",
		fixes: []specFix{notReadyEveryContainer}},
}

// notApplicableSpec names specs an emulated node cannot run, by a pattern of their file or
// their text, with the reason.
type notApplicableSpec struct {
	file, text string
	reason     string
}

// notApplicable are the specs an emulated node cannot run: they are skipped, not run, and
// counted as not applicable. Any other spec that does not run fails the test.
var notApplicable = []notApplicableSpec{}

// releaseFile is the suite's file of what differs between releases (suite): the imports for
// their side effects, and the call that opens the node's CRI clients.
const releaseFile = `//go:build linux

package e2enode

import (
	"context"

	internalapi "k8s.io/cri-api/pkg/apis"

	// The release's imports for their side effects (suite.imports).
%s)

// criClients opens the node's CRI clients as the release's util.go does (suite.criClient).
func criClients(ctx context.Context) (internalapi.RuntimeService, internalapi.ImageManagerService, error) {
	_ = ctx // 1.35's takes none
	return %s
}
`

// kubeletConfigFile is the kubelet's configuration file in the specs' working directory, where
// upstream's node e2e helpers read and rewrite it (test/e2e_node/kubeletconfig): each cluster's
// kubelet reads its own (restartbed up --kubelet-config) whenever it starts.
const kubeletConfigFile = "kubelet-config"

// result is one spec's outcome.
type result struct {
	file, text string
	// outcome is pass, fail or n/a.
	outcome string
	// note says why a spec failed or does not apply.
	note string
	// failure is ginkgo's whole failure message.
	failure  string
	duration time.Duration
}

// TestNodeE2E runs the specs of every supported release against restartbed running that
// release, the releases at once (go test -run 'TestNodeE2E/release/1.36' runs one). A release
// whose every spec passed is checked against its table in docs/upstream-tests.md, which must say
// what the run found (-update-docs writes the tables).
func TestNodeE2E(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	restartbed := filepath.Join(t.TempDir(), "restartbed")
	goCmd(t, root, nil, "build", "-o", restartbed, "./cmd/restartbed")
	var (
		mu     sync.Mutex
		ran    = map[string]releaseRun{}
		passed = map[string]bool{}
		builds sync.WaitGroup
	)
	t.Run("release", func(t *testing.T) {
		for i, release := range controlplane.Releases() {
			t.Run(release.Minor(), func(t *testing.T) {
				builds.Add(1) // before Parallel: every release -run selects has counted itself before any resumes
				t.Parallel()
				r, ok := runRelease(t, root, restartbed, release, i, &builds)
				mu.Lock()
				defer mu.Unlock()
				ran[release.Minor()], passed[release.Minor()] = r, ok
			})
		}
	})
	if *focus != "" {
		return
	}
	docs := filepath.Join(root, "docs", "upstream-tests.md")
	if *updateDocs {
		if len(ran) != len(controlplane.Releases()) {
			t.Fatal("-update-docs needs every spec of every release: it cannot go with a -run that leaves a release out")
		}
		for minor, r := range ran {
			if len(r.results) == 0 {
				t.Fatalf("-update-docs: no spec of %s ran (its clusters did not come up?): the tables are left as they were", minor)
			}
		}
		writeDocs(t, docs, ran)
	} else {
		for _, minor := range slices.Sorted(maps.Keys(ran)) {
			if passed[minor] {
				checkDocs(t, docs, ran[minor])
			}
		}
	}
	if *updateDurations {
		rec, err := readDurations(durationsFile)
		if err != nil {
			t.Fatal(err)
		}
		for minor, r := range ran {
			if passed[minor] {
				rec[minor] = measured(r.parallel, r.results)
			}
		}
		if err := rec.write(durationsFile); err != nil {
			t.Fatal(err)
		}
	}
}

// releaseRun is one release's outcome.
type releaseRun struct {
	release controlplane.Release
	results []result
	// parallel is how long the parallel specs took under ginkgo.
	parallel time.Duration
}

// runRelease builds the release's specs, runs them against `restartbed up` of that release and
// fails t for every spec that does not pass and is not listed in notApplicable; it returns every
// spec's outcome. The clusters start once every release's specs are built (builds, which counts
// the releases that run): the builds' compiles and links take both cores for minutes, and a
// release whose specs ran beside another's build would run its timed specs (a pod's deletion
// within 5 s, a sidecar started after another's "Started" line) on the cores those left.
//
// A ginkgo dry run lists the specs first; schedule deals them to the release's clusters by their
// recorded durations, and each spec's outcome is read from the report of the one ginkgo run that
// was to run it: a spec that run does not report, or reports skipped, fails.
func runRelease(t *testing.T, root, restartbed string, release controlplane.Release, index int, builds *sync.WaitGroup) (releaseRun, bool) {
	work := t.TempDir()
	s, ok := suites[release.Minor()]
	bin, ginkgo := func() (string, string) {
		defer builds.Done() // also when the build fails: the other releases go on
		if !ok {
			t.Fatalf("no node e2e files listed for Kubernetes %s: add them to suites", release.Minor())
		}
		return buildSuite(t, root, release, s, work)
	}()
	builds.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	b := built{release: release, suite: s, restartbed: restartbed, ginkgo: ginkgo, bin: bin, gates: featureGates(release), work: work}
	all := list(t, s, ginkgo, bin, b.gates, work)
	if *focus != "" {
		all = slices.DeleteFunc(all, func(sp spec) bool { return !sp.runs }) // not chosen
	}
	rec, err := readDurations(durationsFile)
	if err != nil {
		t.Fatal(err)
	}
	// Every other release runs its parallel specs last, so that at most half of the releases
	// run theirs at once.
	lanes := schedule(all, rec[release.Minor()], clustersPerRelease, index%2 == 1)
	t.Logf("%s's specs on %d clusters, by the durations of %s:\n%s", release.Kubernetes, len(lanes), durationsFile, describe(lanes))
	var (
		mu       sync.Mutex
		reports  = map[string]ginkgoReport{} // by step, lane/step
		owners   = map[string]string{}       // the step that runs each spec, by spec key
		parallel time.Duration
	)
	for _, l := range lanes {
		for _, st := range l.steps {
			for _, sp := range st.specs {
				owners[sp.key()] = l.name + "/" + st.name
			}
		}
	}
	// The lanes run at once, each in a goroutine of its own (t.Run may be called from several),
	// so that -parallel bounds only the releases.
	t.Run("specs", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, l := range lanes {
			wg.Go(func() {
				t.Run(l.name, func(t *testing.T) {
					got, took := b.runLane(ctx, t, l)
					mu.Lock()
					defer mu.Unlock()
					maps.Copy(reports, got)
					parallel = max(parallel, took)
				})
			})
		}
		wg.Wait()
	})
	results := judge(all, owners, reports)
	if *focus != "" {
		for _, r := range results {
			t.Logf("%s: %s (%s)\n%s", r.outcome, r.text, r.duration.Round(time.Second), r.failure)
		}
		return releaseRun{release: release, results: results}, false
	}
	passed := report(t, results)
	return releaseRun{release: release, results: results, parallel: parallel}, passed && !t.Failed()
}

// built is a release's specs, built, and what running them takes.
type built struct {
	release controlplane.Release
	suite   suite
	// restartbed, ginkgo and bin are the binaries: restartbed's, the ginkgo CLI and the specs'.
	restartbed, ginkgo, bin string
	// gates are the specs' --feature-gates.
	gates string
	// work is the release's directory; each lane has one inside.
	work string
}

// runLane starts the lane's cluster and runs its steps on it one after another; it returns each
// step's report, by lane/step, and how long the parallel step took, if it has one.
func (b built) runLane(ctx context.Context, t *testing.T, l lane) (map[string]ginkgoReport, time.Duration) {
	dir := filepath.Join(b.work, l.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	node := up(ctx, t, b.restartbed, b.release, dir)
	token := adminToken(ctx, t, filepath.Join(dir, "kubeconfig"))
	tools := hostTools(t, b.restartbed, dir)
	reports := map[string]ginkgoReport{}
	var parallel time.Duration
	for _, st := range l.steps {
		extra := []string{"--label-filter=" + serialLabel, "--focus=" + focusOf(st.specs)}
		if st.parallel {
			extra = []string{"--label-filter=!" + serialLabel}
		}
		start := time.Now()
		reports[l.name+"/"+st.name] = run(t, b.suite, b.ginkgo, b.bin, node, token, b.gates, dir, st, tools, extra...)
		if st.parallel {
			parallel = time.Since(start)
		}
	}
	return reports, parallel
}

// featureGates are the gates restartbed turns on in the cluster beyond the release's defaults,
// as --feature-gates says them to the specs, which skip a spec whose gate they think is off.
func featureGates(release controlplane.Release) string {
	var parts []string
	for name, on := range envtest.RequiredFeatureGates(release) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, on))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// goCmd runs the go command in dir and returns its output, failing the test with it on error.
func goCmd(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 8<<10))
	}
	return out
}

// buildSuite builds upstream's specs into a test binary, with the ginkgo CLI of the same
// module graph to run it in parallel.
func buildSuite(t *testing.T, root string, release controlplane.Release, s suite, work string) (bin, ginkgo string) {
	t.Helper()
	dir := filepath.Join(work, "e2e_node")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
	var mod struct{ Dir string }
	out := goCmd(t, dir, env, "mod", "download", "-json", "k8s.io/kubernetes@"+release.Kubernetes)
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("finding k8s.io/kubernetes %s in the module cache: %v\n%s", release.Kubernetes, err, out)
	}
	src := filepath.Join(mod.Dir, "test", "e2e_node")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	// The specs' CRI proxy (testdata/restartbed_suite_test.go) stands in front of the node's
	// runtime socket for the specs' own CRI calls only: restartbed's kubelet runs its runtime
	// in-process and never calls through it, so a failure a spec injects there would not reach
	// the kubelet, and such a spec would test nothing.
	for _, f := range specFiles {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "addCRIProxyInjector(") {
			t.Fatalf("%s of %s injects CRI failures through the CRI proxy, which restartbed's kubelet does not call through: list the specs that do in notApplicable", f, release.Kubernetes)
		}
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".go") && (!strings.HasSuffix(name, "_test.go") || slices.Contains(specFiles, name) || slices.Contains(helperFiles, name)) {
			files = append(files, filepath.Join(src, name))
		}
	}
	files = append(files, filepath.Join("testdata", "restartbed_suite_test.go"))
	applied := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, fix := range s.fixes {
			if fix.file != filepath.Base(f) {
				continue
			}
			if data, err = fix.apply(data); err != nil {
				t.Fatalf("%s: %v", release.Kubernetes, err)
			}
			applied++
		}
		writeFile(t, filepath.Join(dir, filepath.Base(f)), data)
	}
	if applied != len(s.fixes) {
		t.Fatalf("%s: %d of %d spec fixes are for files the suite does not build", release.Kubernetes, len(s.fixes)-applied, len(s.fixes))
	}
	var imports strings.Builder
	for _, imp := range s.imports {
		fmt.Fprintf(&imports, "\t_ %q\n", imp)
	}
	writeFile(t, filepath.Join(dir, "restartbed_release_test.go"), fmt.Appendf(nil, releaseFile, imports.String(), s.criClient))
	releaseDir := filepath.Join(root, "envtest", "controlplane", "releases", "v"+release.Minor())
	gomod, err := os.ReadFile(filepath.Join(releaseDir, "kubernetes.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gomod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(gomod, []byte("module restartbed.localhost/upstream/kubernetes/e2enode"))
	writeFile(t, filepath.Join(dir, "go.mod"), gomod)
	copyFile(t, filepath.Join(releaseDir, "kubernetes.sum"), filepath.Join(dir, "go.sum"))
	// The ginkgo CLI, in the module graph so that it matches the library the specs link.
	writeFile(t, filepath.Join(dir, "tools.go"), []byte("//go:build tools\n\npackage e2enode\n\nimport _ \"github.com/onsi/ginkgo/v2/ginkgo\"\n"))

	// The binaries are kept in the user cache under a key of everything they are built from,
	// as the control plane's are: a later run links nothing.
	cached := filepath.Join(cacheDir(t), "node-e2e", release.Minor()+"-"+buildKey(t, dir, goCmd(t, dir, env, "env", "GOVERSION")))
	bin, ginkgo = filepath.Join(cached, "e2e_node.test"), filepath.Join(cached, "ginkgo")
	if _, err := os.Stat(ginkgo); err == nil {
		t.Logf("upstream's node e2e specs of %s, built before: %s", release.Kubernetes, cached)
		return bin, ginkgo
	}
	start := time.Now()
	goCmd(t, dir, env, "mod", "tidy")
	built := filepath.Join(work, "built")
	// -trimpath, as restartbed's build of the release's control plane (package controlplane):
	// the packages both link, most of Kubernetes', are then compiled once for both.
	goCmd(t, dir, env, "test", "-c", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(built, "e2e_node.test"), ".")
	goCmd(t, dir, env, "build", "-trimpath", "-o", filepath.Join(built, "ginkgo"), "github.com/onsi/ginkgo/v2/ginkgo")
	// In place whole or not at all: ginkgo, looked for above, is renamed last. The release's
	// older builds go: one build a release is kept.
	older, _ := filepath.Glob(filepath.Join(filepath.Dir(cached), release.Minor()+"-*"))
	for _, o := range older {
		_ = os.RemoveAll(o)
	}
	if err := os.MkdirAll(cached, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"e2e_node.test", "ginkgo"} {
		if err := os.Rename(filepath.Join(built, name), filepath.Join(cached, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("built upstream's node e2e specs of %s in %s into %s", release.Kubernetes, time.Since(start).Round(time.Second), cached)
	return bin, ginkgo
}

// cacheDir is restartbed's directory in the user cache.
func cacheDir(t *testing.T) string {
	t.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("the user cache: %v (set XDG_CACHE_HOME or HOME)", err)
	}
	return filepath.Join(dir, "restartbed")
}

// buildKey is a hash of the files of the scratch module in dir, the Go version that builds them
// and the way they are built.
func buildKey(t *testing.T, dir string, goVersion []byte) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n-trimpath -ldflags=-s -w\n", bytes.TrimSpace(goVersion))
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data)
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// What `restartbed up` prints once the cluster serves: the apiserver's URL, then the node's
// kubelet healthz.
var (
	upLine      = regexp.MustCompile(`^restartbed is up .* at (https://\S+?)/?$`)
	healthzLine = regexp.MustCompile(`^kubelet healthz of (\S+): (http://\S+)$`)
)

// controlSocket is the node control socket of `restartbed up`, in the work directory.
const controlSocket = "control.sock"

// node is the one node of `restartbed up` as the specs reach it.
type node struct {
	// host is the apiserver's URL.
	host string
	// healthz is the kubelet's healthz endpoint.
	healthz string
	// runtime is the node's CRI endpoint.
	runtime string
}

// up runs `restartbed up` with one node until the test ends, its kubelet served as a systemd
// unit on the control socket, its healthz on a port the system picks (the banner says which:
// nine clusters start at once, and a port chosen before one starts can be taken by another's
// process meanwhile) and its container runtime on a CRI socket.
func up(ctx context.Context, t *testing.T, restartbed string, release controlplane.Release, work string) node {
	t.Helper()
	sockets := filepath.Join(work, "cri")
	if err := os.MkdirAll(sockets, 0o755); err != nil {
		t.Fatal(err)
	}
	// The kubelet starts with nothing in its file but its type, as a node with the kubelet's
	// defaults; the specs that change it write back what /configz reports, changed.
	writeFile(t, filepath.Join(work, kubeletConfigFile), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"))
	cmd := exec.CommandContext(ctx, restartbed, "up", "--nodes", "1", "--kubernetes-version", release.Minor(),
		"--kubeconfig", filepath.Join(work, "kubeconfig"),
		"--control-socket", filepath.Join(work, controlSocket), "--kubelet-healthz-port", "any",
		"--runtime-socket-dir", sockets, "--kubelet-config", filepath.Join(work, kubeletConfigFile))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(work, "restartbed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Cancel()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("restartbed up: %v", err)
		}
		_ = logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("restartbed up said on stderr (last 8 KiB):\n%s", tail(string(data), 8<<10))
		}
	})
	upc := make(chan node, 1)
	go func() {
		var n node
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := upLine.FindStringSubmatch(sc.Text()); m != nil {
				n.host = m[1]
			}
			if m := healthzLine.FindStringSubmatch(sc.Text()); m != nil && n.host != "" {
				n.healthz = m[2]
				n.runtime = "unix://" + fakekubelet.RuntimeSocket(sockets, m[1])
				upc <- n
			}
		}
		close(upc)
	}()
	select {
	case n, ok := <-upc:
		if !ok {
			t.Fatal("restartbed up ended before it was up")
		}
		return n
	case <-time.After(20 * time.Minute): // the first run builds the control plane
		t.Fatal("restartbed up did not come up within 20 minutes")
	}
	return node{}
}

// hostTools makes the commands upstream's framework runs on a node — "sudo systemctl list-units,
// reset-failed, kill, restart" for the kubelet's unit — in a directory for the front of the specs'
// PATH: sudo runs its command as it is (the specs run as the user that runs restartbed up), and
// systemctl is restartbed's, on the control socket. It returns the specs' environment.
func hostTools(t *testing.T, restartbed, work string) []string {
	t.Helper()
	dir := filepath.Join(work, "host-tools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{
		"sudo":      "#!/bin/sh\nexec \"$@\"\n",
		"systemctl": fmt.Sprintf("#!/bin/sh\nexec %q systemctl --control-socket %q \"$@\"\n", restartbed, filepath.Join(work, controlSocket)),
	}
	for name, script := range tools {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// adminToken gives the specs what upstream's node suite gives them: a bearer token with which
// they may do anything. Here it is a cluster-admin service account's.
func adminToken(ctx context.Context, t *testing.T, kubeconfig string) string {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "kube-system", "node-e2e"
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](6 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// specArgs are the ginkgo flags that choose the specs: the suite's files, -focus, what does not
// apply or is out of scope, and the extra flags.
func specArgs(s suite, extra ...string) []string {
	var args []string
	for _, f := range s.focus() {
		args = append(args, "--focus-file="+f)
	}
	if *focus != "" {
		args = append(args, "--focus="+*focus)
	}
	for _, na := range notApplicable {
		if na.file != "" {
			args = append(args, "--skip-file="+regexp.QuoteMeta(na.file))
		} else {
			args = append(args, "--skip="+na.text)
		}
	}
	if s.outOfScope != "" {
		args = append(args, "--skip="+s.outOfScope)
	}
	return append(args, extra...)
}

// run runs one step's specs with ginkgo, in the environment env and with the extra ginkgo flags,
// and returns its report. It fails t when ginkgo exits with an error: a failed spec, a failed
// suite node (BeforeSuite and the like), the suite's timeout.
func run(t *testing.T, s suite, ginkgo, bin string, n node, token, gates, work string, st step, env []string, extra ...string) ginkgoReport {
	t.Helper()
	reportFile := filepath.Join(work, st.name+"-report.json")
	args := []string{"run", "--no-color", "--timeout=70m", "--json-report=" + reportFile}
	if st.parallel {
		args = append(args, "-p", fmt.Sprintf("--procs=%d", parallelism))
	}
	args = append(args, specArgs(s, extra...)...)
	// ginkgo runs a compiled suite in the binary's directory, which is the specs' working
	// directory and so where they find the kubelet's configuration file: this cluster's.
	local := filepath.Join(work, filepath.Base(bin))
	if err := os.Symlink(bin, local); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	args = append(args, local, "--", "--host="+n.host, "--bearer-token="+token, "--kubelet-healthz-url="+n.healthz,
		"--container-runtime-endpoint="+n.runtime, "--cri-proxy-enabled")
	if gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	// The specs' temporary files (the CRI proxy's socket among them) go where the test removes
	// them.
	tmp := filepath.Join(work, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ginkgo, args...)
	cmd.Dir, cmd.Env = work, append(slices.Clip(env), "TMPDIR="+tmp)
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	t.Logf("ginkgo ran the %s specs (%d) in %s (%v; estimated %s)", st.name, len(st.specs), time.Since(start).Round(time.Second), runErr, st.estimate.Round(time.Second))
	rep := readReport(t, s, reportFile, runErr, out)
	for _, f := range rep.suiteFailures {
		t.Errorf("FAIL %s: %s", st.name, f)
	}
	if runErr != nil {
		// The specs that failed are reported one by one (report); this says that ginkgo did not
		// succeed, whatever the reason, with its output when no spec or suite node explains it.
		t.Errorf("ginkgo exited with %v running the %s specs", runErr, st.name)
		if !rep.failed() {
			t.Logf("ginkgo's output (last 16 KiB):\n%s", tail(string(out), 16<<10))
		}
	}
	return rep
}

// list returns every spec of the chosen files (without the out-of-scope ones), as a dry run
// finds them: whether it would run, and whether it is serial. Its label filter chooses every
// spec, as the steps' (!Serial, Serial) do between them: without one, upstream's framework
// skips every spec whose text names a feature ([Feature:CriProxy]).
func list(t *testing.T, s suite, ginkgo, bin, gates, work string) []spec {
	t.Helper()
	reportFile := filepath.Join(work, "specs.json")
	args := append([]string{"run", "--dry-run", "--no-color", "--json-report=" + reportFile}, specArgs(s, "--label-filter="+serialLabel+" || !"+serialLabel)...)
	args = append(args, bin, "--")
	if gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	cmd := exec.Command(ginkgo, args...)
	cmd.Dir = work
	out, runErr := cmd.CombinedOutput()
	if runErr != nil {
		t.Fatalf("ginkgo's dry run: %v\n%s", runErr, tail(string(out), 16<<10))
	}
	rep := readReport(t, s, reportFile, runErr, out)
	var specs []spec
	for _, sr := range rep.specs {
		sp := sr.spec
		sp.runs = sr.state == "passed"
		if !sp.runs {
			sp.note = skipReason(sp, sr.failure)
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		t.Fatalf("ginkgo's dry run lists no spec of %v", s.focus())
	}
	return specs
}
