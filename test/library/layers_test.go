package library

import (
	"slices"
	"strings"
	"testing"
)

const module = "github.com/restartbed/restartbed/"

// fakekubeletLayers are fakekubelet's packages from the bottom up: each may import only those
// before it (docs/fakekubelet.md, "Running pods"). A new package goes where its imports put it.
var fakekubeletLayers = []string{
	"fakekubelet/container", "fakekubelet/kubeletconfig", "fakekubelet/shards", "fakekubelet/token", "fakekubelet/release", "fakekubelet/images", "fakekubelet/vfs", "fakekubelet/logs", "fakekubelet/network", "fakekubelet/network/networktest", "fakekubelet/relay",
	"fakekubelet/restart", "fakekubelet/status", "fakekubelet/podactions", "fakekubelet/prober",
	"fakekubelet/shell", "fakekubelet/knownimages", "fakekubelet/program", "fakekubelet/hostproc", "fakekubelet/runtime", "fakekubelet/pleg", "fakekubelet/server", "fakekubelet/cri",
	"fakekubelet/nodes",
	"fakekubelet",
}

// TestFakeKubeletLayers: no package of fakekubelet imports one above it, and every package of
// fakekubelet has a place in the layers.
func TestFakeKubeletLayers(t *testing.T) {
	for _, p := range goList(t, "./fakekubelet/...") {
		pkg := strings.TrimPrefix(p.ImportPath, module)
		rank := slices.Index(fakekubeletLayers, pkg)
		if rank < 0 {
			t.Errorf("%s has no place in fakekubeletLayers", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok || !strings.HasPrefix(dep, "fakekubelet") {
				continue
			}
			if depRank := slices.Index(fakekubeletLayers, dep); depRank < 0 || depRank >= rank {
				t.Errorf("%s imports %s, which is not below it", pkg, dep)
			}
		}
	}
}

// TestAgentLinksNoEmulator: the agent binary is the agent alone; nothing of the emulator
// (shell, filesystem, runtime) comes with it.
func TestAgentLinksNoEmulator(t *testing.T) {
	for _, p := range goList(t, "-deps", "./cmd/agent") {
		dep := p.ImportPath
		if strings.HasPrefix(dep, module+"fakekubelet") || strings.HasPrefix(dep, module+"builtins") {
			t.Errorf("cmd/agent links %s", dep)
		}
	}
}
