package jobset

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/scenarios"
)

// requireHostBinaries makes a host that cannot run host binaries fail the test instead of
// skipping it; make test-upstream sets it, so CI never skips.
const requireHostBinaries = "RESTARTBED_REQUIRE_HOST_BINARIES"

// agentScenarios are restartbed's bundled scenarios whose agent sidecar becomes upstream's binary:
// KEP-467's Stories 1 and 2, and a worker's node lost mid-run (the partition cuts its agent off).
var agentScenarios = []string{"story1-fast-recovery.yaml", "story2-recreate-then-fail.yaml", "inplace-restart-node-loss.yaml"}

// TestUpstreamAgent runs upstream JobSet v0.12.0's in-place-restart agent, built unmodified from
// this module's sigs.k8s.io/jobset, as the agent sidecar of agentScenarios, with
// restartbed's JobSet controller and with upstream's manager: each group must restart in place,
// and Story 2's exit codes must do what the KEP says, with the real agent.
func TestUpstreamAgent(t *testing.T) {
	t.Parallel()
	agentBinary, manager := upstreamBinaries(t)
	for _, mode := range []struct {
		name     string
		upstream bool
	}{{"restartbed's controller", false}, {"upstream's manager", true}} {
		for _, file := range agentScenarios {
			t.Run(mode.name+"/"+strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
				t.Parallel() // a cluster each; the scenarios mostly wait out their timing
				sc, err := scenarios.Load(filepath.Join("..", "..", "..", "scenarios", "examples", file))
				if err != nil {
					t.Fatal(err)
				}
				replaced := 0
				for i := range sc.Spec.Programs {
					if p := &sc.Spec.Programs[i]; p.Builtin == "agent" {
						p.Builtin, p.Binary = "", agentBinary
						replaced++
					}
				}
				if replaced == 0 {
					t.Fatalf("%s has no agent program to replace", file)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var progress strings.Builder
				opts := scenarios.RunOptions{AllowHostBinaries: true}
				if mode.upstream {
					opts = upstreamOptions(t, func(ctx context.Context, cluster *envtest.Cluster) error {
						runManager(ctx, t, cluster, manager, inPlaceGate)
						return nil
					})
				}
				opts.Progress = &progress
				res := scenarios.Run(ctx, sc, opts)
				t.Log("\n" + progress.String())
				if !res.Passed() {
					t.Errorf("%s with upstream's agent binary and %s failed: %v", file, mode.name, res.Err)
				}
			})
		}
	}
}

// inPlaceGate is the manager's configuration that turns on in-place restart.
const inPlaceGate = "featureGates: {InPlaceRestart: true}\n"

// upstreamBinaries builds upstream's agent and manager, unmodified, from this module's
// sigs.k8s.io/jobset. A host that cannot run host binaries skips the test, or fails it when
// requireHostBinaries is set.
func upstreamBinaries(t *testing.T) (agent, manager string) {
	t.Helper()
	if err := hostproc.Check(); err != nil {
		if os.Getenv(requireHostBinaries) != "" {
			t.Fatalf("%s is set and this host cannot run host binaries: %v", requireHostBinaries, err)
		}
		t.Skipf("this host cannot run host binaries: %v", err)
	}
	bin := t.TempDir()
	agent, manager = filepath.Join(bin, "in-place-restart-agent"), filepath.Join(bin, "jobset-manager")
	for target, pkg := range map[string]string{agent: "sigs.k8s.io/jobset/cmd/in-place-restart-agent", manager: "sigs.k8s.io/jobset"} {
		if out, err := exec.Command("go", "build", "-o", target, pkg).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
	}
	return agent, manager
}

// upstreamOptions are the run options of a cluster with upstream's CRD and webhooks and no
// JobSet controller of restartbed's; started runs upstream's manager on it.
func upstreamOptions(t *testing.T, started func(context.Context, *envtest.Cluster) error) scenarios.RunOptions {
	return scenarios.RunOptions{AllowHostBinaries: true,
		Configure: func(o *envtest.Options) {
			o.JobSet = false
			o.Scheme = newScheme(t)
			o.Webhooks = crenvtest.WebhookInstallOptions{Paths: []string{upstreamManifest(t, "webhook", "manifests.yaml")}}
			o.CRDDirectoryPaths = []string{upstreamManifest(t, "crd", "bases")}
		},
		Started: started}
}

// upstreamManifest is the path of a manifest (or directory) under upstream's config/components.
func upstreamManifest(t *testing.T, path ...string) string {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{strings.TrimSpace(string(dir)), "config", "components"}, path...)...)
}
