package envtest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/timing"
)

// Bad options are refused before anything starts: no binary is looked up, built or run.
func TestStartRefusesBadOptionsFirst(t *testing.T) {
	badTiming := timing.Fast()
	badTiming.JobPodFailureBackOff = 0
	cases := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{
			name:    "unknown gate",
			opts:    Options{FeatureGates: map[string]bool{"RestartPod": true}},
			wantErr: "feature gates of Kubernetes v1.37.2: unrecognized feature gate: RestartPod",
		},
		{
			name:    "gate of the wrong release",
			opts:    Options{KubernetesVersion: "1.37", FeatureGates: map[string]bool{GateNodeDeclaredFeatures: false}},
			wantErr: "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true",
		},
		{
			name:    "unsupported version",
			opts:    Options{KubernetesVersion: "1.34"},
			wantErr: "Kubernetes 1.34 is not supported; supported: 1.35 (v1.35.8), 1.36 (v1.36.4), 1.37 (v1.37.2)",
		},
		{
			name:    "bad timing",
			opts:    Options{Timing: &badTiming},
			wantErr: "jobPodFailureBackOff must be positive",
		},
		{
			name:    "bad pool",
			opts:    Options{Nodes: []fakekubelet.NodePool{{Name: "Pool A", Count: 1}}},
			wantErr: `node pools: pools[0].name "Pool A"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A cache directory that cannot be one: reaching the lookup would fail differently.
			notADir := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(notADir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			tc.opts.Assets = controlplane.Options{CacheDir: notADir, Progress: io.Discard}
			c, err := Start(context.Background(), tc.opts)
			if err == nil {
				_ = c.Stop()
				t.Fatal("Start() succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Start() error = %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
