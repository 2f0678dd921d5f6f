package envtest

import (
	"context"
	"strings"
	"testing"

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
			wantErr: "feature gates: unrecognized feature gate: RestartPod",
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
			// An assets directory that does not exist: reaching the lookup would fail differently.
			t.Setenv("KUBEBUILDER_ASSETS", t.TempDir()+"/absent")
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
