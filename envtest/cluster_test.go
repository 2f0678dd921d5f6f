package envtest

import (
	"context"

	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet"
	"github.com/restartbed/restartbed/fakekubelet/program"
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
			name:    "kubelet processes without their binary",
			opts:    Options{KubeletProcesses: 2, Nodes: []fakekubelet.NodePool{{Name: "a", Count: 1}}},
			wantErr: "Options.KubeletProcesses: KubeletCommand is required",
		},
		{
			name: "kubelet processes with the in-process kubelet's values",
			opts: Options{KubeletProcesses: 2, KubeletCommand: []string{"restartbed"}, Programs: []program.Rule{{Container: "c", Script: "true"}},
				Nodes: []fakekubelet.NodePool{{Name: "a", Count: 1}, {Name: "b", Count: 1}}},
			wantErr: "2 node pools: the processes take one pool's flags",
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

// The kubelet processes get the cluster's release, timing and gates, the pool's flags and the
// caller's arguments; a scenario's nodes and timing are its own.
func TestKubeletProcessArgs(t *testing.T) {
	c := &Cluster{Release: controlplane.Release{Kubernetes: "v1.36.4"}, Timing: timing.Fast(), work: &workDir{path: "/w"}}
	opts := Options{KubeletCommand: []string{"/bin/restartbed", "-v", "2"}, ImageCommands: true,
		FeatureGates: map[string]bool{"B": false, "A": true},
		Nodes: []fakekubelet.NodePool{{Name: "tpu", Count: 4, Labels: map[string]string{"zone": "a"},
			Taints: []corev1.Taint{{Key: "tpu", Effect: corev1.TaintEffectNoSchedule}}}},
		KubeletArgs: []string{"--takeover"}}
	want := "-v 2 kubelet --kubeconfig /k --shard-group restartbed --shard-name kubelet-1 --control-socket /w/kubelet-1.sock --kubernetes-version v1.36.4 " +
		"--node-ip 127.0.0.1 --node-identities --image-commands=true --timing fast --feature-gates A=true,B=false " +
		"--nodes 4 --pool tpu --node-labels zone=a --register-with-taints tpu:NoSchedule --takeover"
	if diff := cmp.Diff(want, strings.Join(c.kubeletProcessArgs(opts, "/k", 1), " ")); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	opts.KubeletArgs, opts.FeatureGates = []string{"--from", "s.yaml"}, nil
	want = "-v 2 kubelet --kubeconfig /k --shard-group restartbed --shard-name kubelet-0 --control-socket /w/kubelet-0.sock --kubernetes-version v1.36.4 " +
		"--node-ip 127.0.0.1 --node-identities --image-commands=true --from s.yaml"
	if diff := cmp.Diff(want, strings.Join(c.kubeletProcessArgs(opts, "/k", 0), " ")); diff != "" {
		t.Errorf("with a scenario (-want +got)\n%s", diff)
	}
}
