package release

import (
	"strings"
	"testing"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		version, want, err string
	}{
		{version: "v1.35.8", want: "1.35"},
		{version: "1.36", want: "1.36"},
		{version: "v1.37.2", want: "1.37"},
		{version: "v1.34.1", err: "emulates the kubelets of 1.35 to 1.37"},
		{version: "1.38", err: "emulates the kubelets of 1.35 to 1.37"},
		{version: "2.35", err: "emulates the kubelets of 1.35 to 1.37"},
		{version: "latest", err: `kubelet version "latest"`},
	} {
		k, err := For(tc.version)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("For(%q) = %v, %v; want an error with %q", tc.version, k, err, tc.err)
			}
		case err != nil || k.String() != tc.want:
			t.Errorf("For(%q) = %v, %v; want %s", tc.version, k, err, tc.want)
		}
	}
}

// TestZeroValueIsOldest: a zero Kubelet behaves as the oldest supported release.
func TestZeroValueIsOldest(t *testing.T) {
	var zero Kubelet
	if zero.String() != "1.35" || zero.CarriesLastStateAcrossRestartAll() != Minor(35).CarriesLastStateAcrossRestartAll() ||
		zero.ExplainsSandboxNotReady() != Minor(35).ExplainsSandboxNotReady() || zero.ExecProbesWhileTerminating() != Minor(35).ExecProbesWhileTerminating() ||
		zero.SandboxImage() != Minor(35).SandboxImage() {
		t.Errorf("the zero value is not 1.35: %v", zero)
	}
}

func TestSandboxImage(t *testing.T) {
	for minor, want := range map[uint]string{35: "registry.k8s.io/pause:3.10.1", 36: "registry.k8s.io/pause:3.10.2", 37: "registry.k8s.io/pause:3.10.2"} {
		if got := Minor(minor).SandboxImage(); got != want {
			t.Errorf("1.%d: %s, want %s", minor, got, want)
		}
	}
}
