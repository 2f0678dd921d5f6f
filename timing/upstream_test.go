package timing_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
)

// kueueModule is the Kueue release whose failure recovery restartbed implements.
const kueueModule = "sigs.k8s.io/kueue@v0.17.0"

// upstreamValue says where upstream defines one value: the first group of pattern, in file of
// the module, is a Go expression of durations (time.Second), numbers and conversions; unit
// scales a bare number (seconds). staging names a Kubernetes staging module (k8s.io/...) that
// holds the file instead of k8s.io/kubernetes; next is where else to look, for a value that
// moved between releases.
type upstreamValue struct {
	staging, file, pattern string
	unit                   time.Duration
	next                   *upstreamValue
}

// kubernetesDefaults are the realistic profile's values as each Kubernetes release defines
// them: kube-controller-manager's controllers and flags, the apiserver's admission, the kubelet.
var kubernetesDefaults = map[string]upstreamValue{
	"JobSyncBatchPeriod":        {file: "pkg/controller/job/job_controller.go", pattern: `SyncJobBatchPeriod = (.+)`},
	"JobPodFailureBackOff":      {file: "pkg/controller/job/job_controller.go", pattern: `DefaultJobPodFailureBackOff = (.+)`},
	"JobPodFailureBackOffMax":   {file: "pkg/controller/job/job_controller.go", pattern: `MaxJobPodFailureBackOff = (.+)`},
	"NodeLeaseDuration":         {file: "pkg/kubelet/apis/config/v1beta1/defaults.go", pattern: `obj\.NodeLeaseDurationSeconds = (.+)`, unit: time.Second},
	"NodeStatusReportFrequency": {file: "pkg/kubelet/apis/config/v1beta1/defaults.go", pattern: `obj\.NodeStatusReportFrequency = metav1\.Duration\{Duration: (.+)\}`},
	// 1.37 moved it from the cloud-provider's shared options to the node lifecycle controller's.
	"NodeMonitorPeriod": {file: "pkg/controller/nodelifecycle/config/v1alpha1/defaults.go", pattern: `obj\.NodeMonitorPeriod = metav1\.Duration\{Duration: (.+)\}`,
		next: &upstreamValue{staging: "k8s.io/cloud-provider", file: "config/v1alpha1/defaults.go", pattern: `obj\.NodeMonitorPeriod = metav1\.Duration\{Duration: (.+)\}`}},
	"NodeMonitorGracePeriod":   {file: "pkg/controller/nodelifecycle/config/v1alpha1/defaults.go", pattern: `obj\.NodeMonitorGracePeriod = metav1\.Duration\{Duration: (.+)\}`},
	"NodeStartupGracePeriod":   {file: "pkg/controller/nodelifecycle/config/v1alpha1/defaults.go", pattern: `obj\.NodeStartupGracePeriod = metav1\.Duration\{Duration: (.+)\}`},
	"NodeEvictionRate":         {file: "cmd/kube-controller-manager/app/options/nodelifecyclecontroller.go", pattern: `"node-eviction-rate", ([0-9.]+),`},
	"DefaultTolerationSeconds": {file: "plugin/pkg/admission/defaulttolerationseconds/admission.go", pattern: `defaultNotReadyTolerationSeconds\s+= (.+)`, unit: time.Second},
	"PodGCPeriod":              {file: "pkg/controller/podgc/gc_controller.go", pattern: `gcCheckPeriod = (.+)`},
	"PodGCQuarantine":          {file: "pkg/controller/podgc/gc_controller.go", pattern: `quarantineTime = (.+)`},
	"CrashLoopBackOff":         {file: "pkg/kubelet/kubelet.go", pattern: `initialCrashLoopBackOff = (.+)`},
	"CrashLoopBackOffMax":      {file: "pkg/kubelet/apis/config/v1beta1/defaults.go", pattern: `MaxContainerBackOff = (.+)`},
	"CrashLoopBackOffReset":    {file: "pkg/kubelet/kubelet.go", pattern: `eventTime\.Sub\(lastUpdate\) > (.+)`},
	"PLEGRelistPeriod":         {file: "pkg/kubelet/kubelet.go", pattern: `genericPlegRelistPeriod\s+= (.+)`},
	"RestartAllKillGrace":      {file: "pkg/kubelet/kuberuntime/kuberuntime_manager.go", pattern: `minimumGracePeriodInSeconds = (.+)`, unit: time.Second},
	// The kubelet renews its Lease at this fraction of the Lease's duration.
	"nodeLeaseRenewIntervalFraction": {file: "pkg/kubelet/kubelet.go", pattern: `nodeLeaseRenewIntervalFraction = (.+)`},
}

// kueueDefaults are the values Kueue defines.
var kueueDefaults = map[string]upstreamValue{
	"KueueFailureRecoveryThreshold": {file: "pkg/controller/failurerecovery/pod_termination_controller.go", pattern: `forcefulTerminationGracePeriod: (.+),`},
}

// TestRealisticIsUpstream reads every value of the realistic profile from upstream's source, in
// each supported Kubernetes release and in Kueue, so that a default upstream changes fails here
// rather than drifting silently.
func TestRealisticIsUpstream(t *testing.T) {
	r := timing.Realistic()
	profile := map[string]float64{
		"JobSyncBatchPeriod": float64(r.JobSyncBatchPeriod), "JobPodFailureBackOff": float64(r.JobPodFailureBackOff),
		"JobPodFailureBackOffMax": float64(r.JobPodFailureBackOffMax), "NodeLeaseDuration": float64(r.NodeLeaseDuration),
		"NodeStatusReportFrequency": float64(r.NodeStatusReportFrequency), "NodeMonitorPeriod": float64(r.NodeMonitorPeriod),
		"NodeMonitorGracePeriod": float64(r.NodeMonitorGracePeriod), "NodeStartupGracePeriod": float64(r.NodeStartupGracePeriod),
		"NodeEvictionRate": float64(r.NodeEvictionRate), "DefaultTolerationSeconds": float64(r.DefaultTolerationSeconds),
		"PodGCPeriod": float64(r.PodGCPeriod), "PodGCQuarantine": float64(r.PodGCQuarantine),
		"CrashLoopBackOff": float64(r.CrashLoopBackOff), "CrashLoopBackOffMax": float64(r.CrashLoopBackOffMax),
		"CrashLoopBackOffReset": float64(r.CrashLoopBackOffReset), "RestartAllKillGrace": float64(r.RestartAllKillGrace), "PLEGRelistPeriod": float64(r.PLEGRelistPeriod),
		"KueueFailureRecoveryThreshold": float64(r.KueueFailureRecoveryThreshold),
	}
	check := func(t *testing.T, module string, values map[string]upstreamValue) map[string]float64 {
		got := map[string]float64{}
		for name, v := range values {
			got[name] = v.read(t, module)
		}
		for name, want := range got {
			p, ok := profile[name]
			if !ok {
				continue
			}
			// Float32 fields (the eviction rate) compare at float32 precision.
			if p != want && float32(p) != float32(want) {
				t.Errorf("Realistic().%s = %v, but %s defines %v", name, show(name, p), module, show(name, want))
			}
		}
		return got
	}
	for _, rel := range controlplane.Releases() {
		t.Run(rel.Minor(), func(t *testing.T) {
			got := check(t, "k8s.io/kubernetes@"+rel.Kubernetes, kubernetesDefaults)
			if renew := got["NodeLeaseDuration"] * got["nodeLeaseRenewIntervalFraction"]; renew != float64(r.NodeLeaseRenewInterval) {
				t.Errorf("Realistic().NodeLeaseRenewInterval = %v, but %s renews at %v", r.NodeLeaseRenewInterval, rel.Kubernetes, time.Duration(renew))
			}
		})
	}
	t.Run("kueue", func(t *testing.T) { check(t, kueueModule, kueueDefaults) })
}

func show(name string, v float64) string {
	if name == "NodeEvictionRate" {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return time.Duration(v).String()
}

// moduleDirs caches moduleDir's answers.
var moduleDirs = map[string]string{}

// moduleDir returns the module's source directory, from the Go module cache (downloading it if
// need be: building a release's control plane has already fetched it).
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	if dir, ok := moduleDirs[module]; ok {
		return dir
	}
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" || info.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", module, err, info.Error)
	}
	moduleDirs[module] = info.Dir
	return info.Dir
}

// read finds the value in the source of module (k8s.io/kubernetes@v1.X.Y or another module at
// its version) and evaluates it.
func (v upstreamValue) read(t *testing.T, module string) float64 {
	t.Helper()
	if v.staging != "" {
		_, version, _ := strings.Cut(module, "@v1.")
		module = v.staging + "@v0." + version
	}
	src, err := os.ReadFile(filepath.Join(moduleDir(t, module), v.file))
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("%v", err)
	}
	m := regexp.MustCompile(v.pattern).FindSubmatch(src)
	if m == nil && v.next != nil {
		next := *v.next
		next.unit = v.unit
		return next.read(t, module)
	}
	if m == nil {
		t.Fatalf("%s %s: nothing matches %q: upstream moved the value", module, v.file, v.pattern)
	}
	expr, err := parser.ParseExpr(string(m[1]))
	if err != nil {
		t.Fatalf("%s: %q: %v", v.file, m[1], err)
	}
	value, unitless, err := evaluate(expr)
	if err != nil {
		t.Fatalf("%s: %q: %v", v.file, m[1], err)
	}
	if unitless && v.unit != 0 {
		value *= float64(v.unit)
	}
	return value
}

// evaluate computes a constant expression of numbers, time units, products, quotients and
// conversions; unitless says no time unit took part.
func evaluate(e ast.Expr) (value float64, unitless bool, err error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT && e.Kind != token.FLOAT {
			return 0, false, fmt.Errorf("literal %s", e.Value)
		}
		f, err := strconv.ParseFloat(e.Value, 64)
		return f, true, err
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "time" {
			if d, ok := timeUnits[e.Sel.Name]; ok {
				return float64(d), false, nil
			}
		}
	case *ast.ParenExpr:
		return evaluate(e.X)
	case *ast.CallExpr: // a conversion: int64(300), time.Duration(x)
		if len(e.Args) == 1 {
			return evaluate(e.Args[0])
		}
	case *ast.BinaryExpr:
		x, xu, err := evaluate(e.X)
		if err != nil {
			return 0, false, err
		}
		y, yu, err := evaluate(e.Y)
		if err != nil {
			return 0, false, err
		}
		switch e.Op {
		case token.MUL:
			return x * y, xu && yu, nil
		case token.QUO:
			return x / y, xu && yu, nil
		}
	}
	return 0, false, fmt.Errorf("cannot evaluate %T", e)
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}
