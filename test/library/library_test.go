// Package library checks the promises restartbed makes about its packages. To the projects that
// import it: the library links no Kubernetes release (k8s.io/kubernetes), its go.mod needs no
// replace and asks only for the oldest supported minor's libraries, so that a project on any
// supported minor keeps its own (docs/control-plane.md); the consumer modules under examples/
// prove the same from the other side. To its own readers: the emulator's packages are layered,
// and the agent binary links none of them (layers_test.go).
package library

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

// root is the repository, two folders up from this package.
var root = filepath.Join("..", "..")

// listed is what these tests read of a package from go list.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Module     *struct{ Main bool }
}

// goList runs go list -json with args from the repository and returns its packages. go test
// caches a passing result by the files and environment the test itself read, and go list's
// reads are not among them: so goList reads (stats) the repository's go.mod and go.sum and each
// of the module's listed folders and Go files, and an edit to any of them runs these tests again.
// Other modules' packages change only with go.mod or go.sum.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles,Imports,Module"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %s: decoding its output: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
	inputs := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, p := range pkgs {
		if p.Module == nil || !p.Module.Main {
			continue
		}
		if _, err := os.ReadDir(p.Dir); err != nil {
			t.Fatal(err)
		}
		for _, f := range p.GoFiles {
			inputs = append(inputs, filepath.Join(p.Dir, f))
		}
	}
	for _, f := range inputs {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// library lists the packages a project can import: everything but commands, tests, build tools
// and examples.
func library(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	for _, lp := range goList(t, "./...") {
		p := lp.ImportPath
		rel := strings.TrimPrefix(p, "github.com/restartbed/restartbed")
		if strings.HasPrefix(rel, "/cmd") || strings.HasPrefix(rel, "/test") || strings.HasPrefix(rel, "/hack") || strings.HasPrefix(rel, "/examples") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d library packages: %v", len(pkgs), pkgs)
	}
	return pkgs
}

func TestLibraryLinksNoKubernetesRelease(t *testing.T) {
	var linked []string
	for _, p := range goList(t, append([]string{"-deps"}, library(t)...)...) {
		dep := p.ImportPath
		if dep == "k8s.io/kubernetes" || strings.HasPrefix(dep, "k8s.io/kubernetes/") {
			linked = append(linked, dep)
		}
	}
	if len(linked) > 0 {
		t.Errorf("the library links %d packages of k8s.io/kubernetes, which pins its users to one Kubernetes minor: %v", len(linked), linked)
	}
}

func TestGoModAsksForTheOldestSupportedMinor(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mod.Replace) > 0 {
		t.Errorf("go.mod replaces %s: a replace binds every importing project", mod.Replace[0].Old.Path)
	}
	oldest := controlplane.Releases()[0]
	staging := "v0." + strings.TrimPrefix(semver.MajorMinor(oldest.Kubernetes), "v1.")
	for _, r := range mod.Require {
		switch {
		case r.Mod.Path == "k8s.io/kubernetes":
			t.Errorf("go.mod requires k8s.io/kubernetes")
		case strings.HasPrefix(r.Mod.Path, "k8s.io/") && strings.HasPrefix(r.Mod.Version, "v0.") && semver.MajorMinor(r.Mod.Version) != "v0.0":
			if got := semver.MajorMinor(r.Mod.Version); got != staging {
				t.Errorf("go.mod requires %s %s; the oldest supported minor is %s (%s)", r.Mod.Path, r.Mod.Version, oldest.Minor(), staging)
			}
		case r.Mod.Path == "sigs.k8s.io/controller-runtime":
			if got := semver.MajorMinor(r.Mod.Version); got != "v0.23" {
				t.Errorf("go.mod requires controller-runtime %s; the one of Kubernetes %s is v0.23", r.Mod.Version, oldest.Minor())
			}
		}
	}
}
