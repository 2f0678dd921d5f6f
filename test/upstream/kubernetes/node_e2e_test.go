package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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

	"github.com/restartbed/restartbed/envtest/controlplane"
)

var (
	updateDocs = flag.Bool("update-docs", false, "write this run's table into docs/upstream-tests.md")
	focus      = flag.String("focus", "", "run only the specs whose text matches this regexp (ginkgo --focus), log each failure whole, "+
		"and check nothing: for diagnosing a spec")
)

// parallelism is how many ginkgo processes run specs at once. The specs mostly wait on
// containers' sleeps, so more processes than cores keep the run short.
const parallelism = 8

// suite says which of a release's files hold the specs and what they need beside them.
type suite struct {
	// specs are test/e2e_node's test files whose specs run.
	specs []string
	// helpers are test/e2e_node's test files whose functions the specs call; their own specs
	// are not run.
	helpers []string
	// focus are the ginkgo --focus-file patterns: specs and the restart-rule file.
	focus []string
}

// suites are the files of each release's node e2e run. The restart-rule specs moved from
// test/e2e/node/pods.go to test/e2e/common/node/container_restart_policy.go in 1.36.
var suites = map[string]suite{
	"1.37": {
		specs:   []string{"container_lifecycle_test.go", "restart_all_containers_test.go", "container_restart_test.go"},
		helpers: []string{"critical_pod_test.go", "deleted_pods_test.go", "device_manager_test.go", "device_plugin_test.go", "mirror_pod_test.go"},
		focus: []string{`/container_lifecycle_test\.go$`, `/restart_all_containers_test\.go$`, `/container_restart_test\.go$`,
			`/common/node/container_restart_policy\.go$`},
	},
}

// notApplicable are the specs an emulated node cannot run, by a pattern of their file or their
// text, with the reason. They are skipped, not run.
var notApplicable = []struct {
	file, text string
	reason     string
}{
	{file: "container_restart_test.go",
		reason: "rewrites the kubelet's configuration file and restarts it with systemctl, and injects failures through the CRI proxy; restartbed's kubelets have neither"},
	{text: `[Kk]ubelet ?[Rr]estart`,
		reason: "restarts the kubelet with systemctl; restartbed's kubelets run in its process and have no systemd unit"},
	{text: `[Rr]eboot`,
		reason: "reboots the node: stops the kubelet with systemctl and removes its containers with crictl"},
	{text: `bad image`,
		reason: "needs an image registry: restartbed pulls no image, so an image that does not exist cannot fail to pull"},
}

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

func TestNodeE2E(t *testing.T) {
	release := controlplane.DefaultRelease()
	s, ok := suites[release.Minor()]
	if !ok {
		t.Fatalf("no node e2e files listed for Kubernetes %s: add them to suites", release.Minor())
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin, ginkgo := buildSuite(t, root, release, s, work)
	restartbed := filepath.Join(work, "restartbed")
	goCmd(t, root, nil, "build", "-o", restartbed, "./cmd/restartbed")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := up(ctx, t, restartbed, release, work)
	token := adminToken(ctx, t, filepath.Join(work, "kubeconfig"))

	results := run(t, s, ginkgo, bin, host, token, work)
	if *focus != "" {
		for _, r := range results {
			if r.outcome == "n/a" {
				continue // not chosen
			}
			t.Logf("%s: %s (%s)\n%s", r.outcome, r.text, r.duration.Round(time.Second), r.failure)
		}
		if *updateDocs {
			t.Error("-update-docs needs every spec: it cannot go with -focus")
		}
		return
	}
	table := report(t, results)
	if *updateDocs {
		writeDocs(t, filepath.Join(root, "docs", "upstream-tests.md"), release, results, table)
	}
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
	var files []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".go") && (!strings.HasSuffix(name, "_test.go") || slices.Contains(s.specs, name) || slices.Contains(s.helpers, name)) {
			files = append(files, filepath.Join(src, name))
		}
	}
	files = append(files, filepath.Join("testdata", "restartbed_suite_test.go"))
	for _, f := range files {
		copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
	}
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

	start := time.Now()
	goCmd(t, dir, env, "mod", "tidy")
	bin, ginkgo = filepath.Join(work, "e2e_node.test"), filepath.Join(work, "ginkgo")
	goCmd(t, dir, env, "test", "-c", "-o", bin, ".")
	goCmd(t, dir, env, "build", "-o", ginkgo, "github.com/onsi/ginkgo/v2/ginkgo")
	t.Logf("built upstream's node e2e specs of %s in %s", release.Kubernetes, time.Since(start).Round(time.Second))
	return bin, ginkgo
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

// upLine is what `restartbed up` prints once the cluster serves.
var upLine = regexp.MustCompile(`^restartbed is up .* at (https://\S+?)/?$`)

// up runs `restartbed up` with one node until the test ends and returns the apiserver's URL.
func up(ctx context.Context, t *testing.T, restartbed string, release controlplane.Release, work string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, restartbed, "up", "--nodes", "1", "--kubernetes-version", release.Minor(),
		"--kubeconfig", filepath.Join(work, "kubeconfig"))
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
	hostc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := upLine.FindStringSubmatch(sc.Text()); m != nil {
				hostc <- m[1]
			}
		}
		close(hostc)
	}()
	select {
	case host, ok := <-hostc:
		if !ok {
			t.Fatal("restartbed up ended before it was up")
		}
		return host
	case <-time.After(20 * time.Minute): // the first run builds the control plane
		t.Fatal("restartbed up did not come up within 20 minutes")
	}
	return ""
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

// run runs the specs with ginkgo and returns the outcome of every spec of the chosen files.
func run(t *testing.T, s suite, ginkgo, bin, host, token, work string) []result {
	t.Helper()
	reportFile := filepath.Join(work, "report.json")
	args := []string{"run", "-p", fmt.Sprintf("--procs=%d", parallelism), "--no-color", "--timeout=70m", "--json-report=" + reportFile}
	for _, f := range s.focus {
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
	args = append(args, bin, "--", "--host="+host, "--bearer-token="+token)
	cmd := exec.Command(ginkgo, args...)
	cmd.Dir = work
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	t.Logf("ginkgo ran the specs in %s (%v)", time.Since(start).Round(time.Second), runErr)
	data, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("ginkgo wrote no report (%v): %v\n%s", runErr, err, tail(string(out), 16<<10))
	}
	var reports []struct {
		SpecReports []struct {
			LeafNodeType            string
			LeafNodeText            string
			LeafNodeLocation        struct{ FileName string }
			ContainerHierarchyTexts []string
			State                   string
			RunTime                 time.Duration
			Failure                 *struct{ Message string }
		}
	}
	if err := json.Unmarshal(data, &reports); err != nil {
		t.Fatalf("reading ginkgo's report: %v", err)
	}
	var results []result
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType != "It" || !slices.ContainsFunc(s.focus, func(f string) bool { return regexp.MustCompile(f).MatchString(sr.LeafNodeLocation.FileName) }) {
				continue
			}
			res := result{file: filepath.Base(sr.LeafNodeLocation.FileName), text: strings.Join(append(slices.Clone(sr.ContainerHierarchyTexts), sr.LeafNodeText), " "),
				duration: sr.RunTime}
			message := ""
			if sr.Failure != nil {
				message = sr.Failure.Message
			}
			res.failure = message
			switch sr.State {
			case "passed":
				res.outcome = "pass"
			case "skipped", "pending":
				res.outcome, res.note = "n/a", skipReason(res, message)
				if strings.Contains(message, "earlier spec in an ordered container failed") {
					// It applies; it did not run because its container's earlier spec failed.
					res.outcome, res.note = "fail", "not run: an earlier spec of its ordered container failed"
				}
			default:
				res.outcome, res.note = "fail", sr.State+": "+firstLine(message)
			}
			results = append(results, res)
		}
	}
	slices.SortFunc(results, func(a, b result) int { return strings.Compare(a.file+a.text, b.file+b.text) })
	if runErr != nil && !strings.Contains(string(out), "FAIL!") {
		t.Logf("ginkgo's output (last 16 KiB):\n%s", tail(string(out), 16<<10))
	}
	return results
}

// skipReason says why a spec was skipped: ours, or the one it gave.
func skipReason(r result, message string) string {
	for _, na := range notApplicable {
		if (na.file != "" && na.file == r.file) || (na.text != "" && regexp.MustCompile(na.text).MatchString(r.text)) {
			return na.reason
		}
	}
	if message != "" {
		return "skipped itself: " + firstLine(message)
	}
	return "skipped by the suite's default label filter (off-by-default or deprecated feature)"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// report logs the results and fails the test for every applicable spec that failed; it returns
// the results as a markdown table.
func report(t *testing.T, results []result) string {
	t.Helper()
	var table strings.Builder
	counts := map[string]int{}
	fmt.Fprintf(&table, "| file | spec | result | why |\n|---|---|---|---|\n")
	for _, r := range results {
		counts[r.outcome]++
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", r.file, escape(r.text), r.outcome, escape(r.note))
		if r.outcome != "fail" {
			continue
		}
		t.Errorf("FAIL %s (%s): %s", r.text, r.duration.Round(time.Second), r.note)
	}
	applicable := counts["pass"] + counts["fail"]
	fmt.Fprintf(&table, "| **total** | %d specs | **%d of %d applicable pass** | %d not applicable |\n", len(results), counts["pass"], applicable, counts["n/a"])
	t.Logf("upstream node e2e specs: %d pass, %d fail, %d not applicable", counts["pass"], counts["fail"], counts["n/a"])
	if applicable == 0 {
		t.Error("no applicable spec ran")
	}
	return table.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Markers around the generated table in docs/upstream-tests.md.
const (
	tableBegin = "<!-- node e2e table: generated by `go test ./... -args -update-docs` in test/upstream/kubernetes -->"
	tableEnd   = "<!-- end of node e2e table -->"
)

// writeDocs replaces the table between the markers.
func writeDocs(t *testing.T, path string, release controlplane.Release, results []result, table string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no node e2e table markers", path)
	}
	section := fmt.Sprintf("%s\n\nMeasured %s on Kubernetes %s (%d specs).\n\n%s%s", tableBegin,
		time.Now().UTC().Format("2006-01-02"), release.Kubernetes, len(results), table, tableEnd)
	doc = doc[:begin] + section + doc[end+len(tableEnd):]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}
