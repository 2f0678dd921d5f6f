package envtest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveFeatureGates(t *testing.T) {
	cases := []struct {
		name      string
		overrides map[string]bool
		want      map[string]bool
		wantErr   string
	}{
		{
			name: "defaults",
			want: map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: true, GateNodeDeclaredFeatures: true},
		},
		{
			name:      "turning RestartAllContainers off keeps the rest",
			overrides: map[string]bool{GateRestartAllContainers: false},
			want:      map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: false, GateNodeDeclaredFeatures: true},
		},
		{
			name:      "extra gate",
			overrides: map[string]bool{"KubeletCrashLoopBackOffMax": false},
			want: map[string]bool{GateContainerRestartRules: true, GateRestartAllContainers: true, GateNodeDeclaredFeatures: true,
				"KubeletCrashLoopBackOffMax": false},
		},
		{
			name:      "missing dependency, in the apiserver's words",
			overrides: map[string]bool{GateNodeDeclaredFeatures: false},
			wantErr:   "RestartAllContainersOnContainerExits is enabled, but depends on features that are disabled: [NodeDeclaredFeatures]",
		},
		{
			name:      "unknown gate",
			overrides: map[string]bool{"RestartPod": true},
			wantErr:   "unrecognized feature gate: RestartPod",
		},
		{
			name:      "locked gate",
			overrides: map[string]bool{"JobPodReplacementPolicy": false},
			wantErr:   "cannot set feature gate JobPodReplacementPolicy to false, feature is locked to true",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveFeatureGates(tc.overrides)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ResolveFeatureGates() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ResolveFeatureGates() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGatesFlagIsSorted(t *testing.T) {
	got := gatesFlag(map[string]bool{"B": false, "A": true, "C": true})
	if diff := cmp.Diff("A=true,B=false,C=true", got); diff != "" {
		t.Errorf("gatesFlag() (-want +got):\n%s", diff)
	}
}
