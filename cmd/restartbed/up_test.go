package main

import (
	"os"
	"path/filepath"
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
