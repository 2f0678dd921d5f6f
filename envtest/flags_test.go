package envtest

import (
	"slices"
	"strings"
	"testing"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
)

func TestClientLimits(t *testing.T) {
	cases := []struct {
		nodes              int
		wantQPS, wantBurst int
	}{
		{nodes: 0, wantQPS: 20, wantBurst: 30},
		{nodes: 100, wantQPS: 20, wantBurst: 30}, // 100/5 is the default QPS
		{nodes: 105, wantQPS: 21, wantBurst: 42},
		{nodes: 1000, wantQPS: 200, wantBurst: 400},
		{nodes: 5000, wantQPS: 1000, wantBurst: 2000},
	}
	for _, tc := range cases {
		qps, burst := clientLimits(controllerManagerQPS, controllerManagerBurst, tc.nodes)
		if qps != tc.wantQPS || burst != tc.wantBurst {
			t.Errorf("clientLimits(%d, %d, %d nodes) = %d, %d; want %d, %d",
				controllerManagerQPS, controllerManagerBurst, tc.nodes, qps, burst, tc.wantQPS, tc.wantBurst)
		}
	}
}

// kube-controller-manager's flags for a cluster's size: small clusters keep upstream's
// endpoint behaviour, large ones batch it and raise the client limits; the caller's flags win.
func TestControllerManagerArgs(t *testing.T) {
	release, err := controlplane.ResolveRelease("")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{
		Release: release,
		Timing:  timing.Realistic(),
		env:     &crenvtest.Environment{ControlPlane: crenvtest.ControlPlane{APIServer: &crenvtest.APIServer{CertDir: "/certs"}}},
	}
	cases := []struct {
		name      string
		nodes     int
		overrides map[string][]string
		want      []string
		absent    []string
	}{
		{
			name:   "small cluster",
			nodes:  4,
			want:   []string{"--kube-api-qps=20", "--kube-api-burst=30", "--service-account-private-key-file=/certs/sa-signer.key"},
			absent: []string{"--endpointslice-updates-batch-period", "--endpoint-updates-batch-period"},
		},
		{
			name:  "large cluster",
			nodes: 1000,
			want: []string{"--kube-api-qps=200", "--kube-api-burst=400",
				"--endpointslice-updates-batch-period=1s", "--endpoint-updates-batch-period=1s"},
		},
		{
			name:      "the caller's flags win",
			nodes:     1000,
			overrides: map[string][]string{"endpointslice-updates-batch-period": {"0s"}},
			want:      []string{"--endpointslice-updates-batch-period=0s", "--endpoint-updates-batch-period=1s"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := c.controllerManagerArgs("/kubeconfig", "/ca.crt", tc.nodes, tc.overrides)
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("no %s in %v", w, args)
				}
			}
			for _, a := range args {
				for _, prefix := range tc.absent {
					if strings.HasPrefix(a, prefix+"=") {
						t.Errorf("%s for %d nodes; upstream's default is wanted", a, tc.nodes)
					}
				}
			}
			if again := c.controllerManagerArgs("/kubeconfig", "/ca.crt", tc.nodes, tc.overrides); !slices.Equal(args, again) {
				t.Errorf("the flags change from call to call:\n%v\n%v", args, again)
			}
		})
	}
}
