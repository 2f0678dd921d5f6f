package envtest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/restartbed/restartbed/envtest/controlplane"
)

func release(t *testing.T, version string) controlplane.Release {
	t.Helper()
	r, err := controlplane.ResolveRelease(version)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// restartbed turns on only what a release leaves off that RestartAllContainers needs.
func TestRequiredFeatureGates(t *testing.T) {
	for version, want := range map[string]map[string]bool{
		"1.35": {GateRestartAllContainers: true, GateNodeDeclaredFeatures: true},
		"1.36": {},
		"1.37": {},
	} {
		t.Run(version, func(t *testing.T) {
			if diff := cmp.Diff(want, RequiredFeatureGates(release(t, version))); diff != "" {
				t.Errorf("RequiredFeatureGates(%s) (-want +got):\n%s", version, diff)
			}
		})
	}
}

func TestResolveFeatureGates(t *testing.T) {
	watched := []string{GateContainerRestartRules, GateRestartAllContainers, GateNodeDeclaredFeatures, "KubeletCrashLoopBackOffMax"}
	cases := []struct {
		name      string
		version   string
		overrides map[string]bool
		want      map[string]bool // the watched gates in force
		wantFlag  string
		wantErr   string
	}{
		{
			name:     "1.35: restartbed turns on the alpha gates",
			version:  "1.35",
			want:     map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: true, GateNodeDeclaredFeatures: true, "KubeletCrashLoopBackOffMax": true},
			wantFlag: "NodeDeclaredFeatures=true,RestartAllContainersOnContainerExits=true",
		},
		{
			name:     "1.37: the defaults already hold",
			version:  "1.37",
			want:     map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: true, GateNodeDeclaredFeatures: true, "KubeletCrashLoopBackOffMax": true},
			wantFlag: "",
		},
		{
			name:      "1.35: turning RestartAllContainers off keeps the rest",
			version:   "1.35",
			overrides: map[string]bool{GateRestartAllContainers: false},
			want:      map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: false, GateNodeDeclaredFeatures: true, "KubeletCrashLoopBackOffMax": true},
			wantFlag:  "NodeDeclaredFeatures=true",
		},
		{
			name:      "1.36: a gate set to its default is not passed",
			version:   "1.36",
			overrides: map[string]bool{GateRestartAllContainers: true, "KubeletCrashLoopBackOffMax": false},
			want:      map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: true, GateNodeDeclaredFeatures: true, "KubeletCrashLoopBackOffMax": false},
			wantFlag:  "KubeletCrashLoopBackOffMax=false",
		},
		{
			name:      "missing dependency, in the components' words",
			version:   "1.35",
			overrides: map[string]bool{GateNodeDeclaredFeatures: false},
			wantErr:   "feature gates of Kubernetes v1.35.8: RestartAllContainersOnContainerExits is enabled, but depends on features that are disabled: [NodeDeclaredFeatures]",
		},
		{
			name:      "unknown gate",
			version:   "1.36",
			overrides: map[string]bool{"RestartPod": true},
			wantErr:   "unrecognized feature gate: RestartPod",
		},
		{
			name:      "locked gate",
			version:   "1.37",
			overrides: map[string]bool{GateNodeDeclaredFeatures: false},
			wantErr:   "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := release(t, tc.version)
			got, err := ResolveFeatureGates(r, tc.overrides)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ResolveFeatureGates() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(r.FeatureGates()) {
				t.Errorf("ResolveFeatureGates() returned %d gates, want all %d of the release", len(got), len(r.FeatureGates()))
			}
			picked := map[string]bool{}
			for _, name := range watched {
				if _, known := r.FeatureGates()[name]; known {
					picked[name] = got[name]
				}
			}
			if diff := cmp.Diff(tc.want, picked); diff != "" {
				t.Errorf("ResolveFeatureGates() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFlag, gatesFlag(r, got)); diff != "" {
				t.Errorf("gatesFlag() (-want +got):\n%s", diff)
			}
		})
	}
}
