package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/restartbed/restartbed/envtest"
)

// up replaces only a kubeconfig it wrote, so a mistyped --kubeconfig cannot destroy a user's.
func TestUpReplacesOnlyItsOwnKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, context string) string {
		cfg := clientcmdapi.NewConfig()
		cfg.Contexts[context] = &clientcmdapi.Context{Cluster: context}
		cfg.CurrentContext = context
		path := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := checkReplaceable(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("a path with no file: %v", err)
	}
	if err := checkReplaceable(write("ours", envtest.KubeconfigContext)); err != nil {
		t.Errorf("restartbed's own kubeconfig: %v", err)
	}
	theirs := write("theirs", "gke_prod")
	if err := checkReplaceable(theirs); err == nil || !strings.Contains(err.Error(), "not a kubeconfig restartbed wrote") {
		t.Errorf("a user's kubeconfig: got %v", err)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not yaml: ["), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkReplaceable(junk); err == nil {
		t.Error("an unreadable file was accepted")
	}
}

// up --from a scenario that names a host binary refuses it without --allow-host-binaries (exit 2,
// FILE:LINE, nothing started), and takes it with the flag.
func TestUpRefusesHostBinariesWithoutOptIn(t *testing.T) {
	mark := markingControlPlane(t)
	dir, file := hostBinaryScenario(t)
	f := upFlags{featureGates: map[string]bool{}, from: file, kubeconfig: filepath.Join(dir, "kubeconfig"), set: func(string) bool { return false }}
	var out, progress bytes.Buffer
	err := runUp(context.Background(), &out, &progress, f)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != exitInvalid {
		t.Fatalf("want exit %d, got %v", exitInvalid, err)
	}
	if want := file + ":7: spec.programs[0].binary: names the host binary"; !strings.Contains(progress.String(), want) {
		t.Errorf("output:\n%s\nwant it to contain %q", progress.String(), want)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a control-plane binary ran")
	}
	f.allowBinaries = true
	opts, _, err := upOptions(f)
	if err != nil || !opts.AllowHostBinaries || len(opts.Programs) != 1 || opts.Programs[0].Binary != filepath.Join(dir, "agent") {
		t.Errorf("with --allow-host-binaries: options %+v, error %v", opts.Programs, err)
	}
}

// up --crds refuses a CRD it cannot read before anything starts (exit 2, FILE:LINE), and takes
// a directory's CRDs into the cluster's options.
func TestUpCRDs(t *testing.T) {
	mark := markingControlPlane(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.example.com}\nspec: {grup: example.com}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := upFlags{featureGates: map[string]bool{}, crds: []string{"../../test/cli/testdata/crds", bad}, kubeconfig: filepath.Join(dir, "kubeconfig"),
		set: func(string) bool { return false }}
	var out, progress bytes.Buffer
	err := runUp(context.Background(), &out, &progress, f)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != exitInvalid || !strings.Contains(err.Error(), "1 problem(s) in --crds") {
		t.Fatalf("want exit %d for one problem, got %v", exitInvalid, err)
	}
	if want := bad + `:1: CustomResourceDefinition: error unmarshaling JSON: while decoding JSON: json: unknown field "grup"`; !strings.Contains(progress.String(), want) {
		t.Errorf("output:\n%s\nwant it to contain %q", progress.String(), want)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a control-plane binary ran")
	}
	f.crds = f.crds[:1]
	opts, _, err := upOptions(f)
	if err != nil || len(opts.CRDs) != 1 || opts.CRDs[0].Name != "widgets.example.restartbed.dev" {
		t.Errorf("options' CRDs %v, error %v", opts.CRDs, err)
	}
}

// --kubelets moves the nodes into processes of this binary, and refuses what only the in-process
// kubelets serve.
func TestUpKubeletsFlag(t *testing.T) {
	flags := func(set func(*upFlags)) upFlags {
		f := upFlags{featureGates: map[string]bool{}, nodes: 6, kubelets: 3, timing: "fast", jobSet: true, set: func(string) bool { return false }}
		set(&f)
		return f
	}
	opts, _, err := upOptions(flags(func(*upFlags) {}))
	if err != nil {
		t.Fatal(err)
	}
	if opts.KubeletProcesses != 3 || len(opts.KubeletCommand) != 1 || len(opts.Nodes) != 1 || opts.Nodes[0].Count != 6 || opts.Programs != nil {
		t.Errorf("the options: processes %d, command %v, nodes %v, programs %v", opts.KubeletProcesses, opts.KubeletCommand, opts.Nodes, opts.Programs)
	}
	for name, tc := range map[string]struct {
		set  func(*upFlags)
		want string
	}{
		"negative":       {func(f *upFlags) { f.kubelets = -1 }, "--kubelets must not be negative"},
		"no nodes":       {func(f *upFlags) { f.nodes = 0 }, "--kubelets: no nodes to run in them"},
		"control socket": {func(f *upFlags) { f.control.socket = filepath.Join(t.TempDir(), "s") }, "--control-socket, --kubelet-healthz-port"},
	} {
		if _, _, err := upOptions(flags(tc.set)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A --from scenario's spec.kubelets runs its nodes in processes, with its takeover, unless
// --kubelets says otherwise.
func TestUpFromScenarioWithKubelets(t *testing.T) {
	file := filepath.Join("..", "..", "scenarios", "examples", "shard-loss.yaml")
	for name, tc := range map[string]struct {
		kubelets      *int
		wantProcesses int
		wantTakeover  bool
	}{
		"the scenario's":        {wantProcesses: 2, wantTakeover: true},
		"--kubelets 3":          {kubelets: new(3), wantProcesses: 3, wantTakeover: false},
		"--kubelets 0: in here": {kubelets: new(0), wantProcesses: 0},
	} {
		f := upFlags{featureGates: map[string]bool{}, from: file, set: func(flag string) bool { return flag == "kubelets" && tc.kubelets != nil }}
		if tc.kubelets != nil {
			f.kubelets = *tc.kubelets
		}
		opts, _, err := upOptions(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if opts.KubeletProcesses != tc.wantProcesses || slices.Contains(opts.KubeletArgs, "--takeover") != tc.wantTakeover {
			t.Errorf("%s: %d processes with arguments %v, want %d, takeover %t", name, opts.KubeletProcesses, opts.KubeletArgs, tc.wantProcesses, tc.wantTakeover)
		}
	}
}
