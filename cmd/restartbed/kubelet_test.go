package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func kubeletTestFlags() kubeletFlags {
	return kubeletFlags{featureGates: map[string]bool{}, labels: map[string]string{}, capacity: map[string]string{},
		pool: "node", timing: "fast", set: func(string) bool { return false }}
}

// TestJoinOptions turns the flags into the joined kubelets' options, and reports every bad flag
// by name at once.
func TestJoinOptions(t *testing.T) {
	f := kubeletTestFlags()
	f.nodes, f.pool = 8, "tpu"
	f.capacity["google.com/tpu"] = "8"
	f.taints = []string{"dedicated=tpu:NoSchedule"}
	f.manageAnnotations = "kwok.x-k8s.io/node=fake"
	f.nodeIP = "10.1.2.3"
	opts, err := joinOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	p := opts.Pools[0]
	if p.Name != "tpu" || p.Count != 8 || p.Capacity.Name("google.com/tpu", "").String() != "8" ||
		p.Taints[0] != (corev1.Taint{Key: "dedicated", Value: "tpu", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("pool: %+v", p)
	}
	if opts.Manage.Annotations == nil || opts.NodeIP.String() != "10.1.2.3" || opts.Timing.Name != "fast" {
		t.Errorf("options: %+v", opts)
	}

	bad := kubeletTestFlags()
	bad.nodes = -1
	bad.capacity["cpu"] = "lots"
	bad.taints = []string{"no-effect", "k=v:Sometimes"}
	bad.manageAll, bad.manageLabels = true, "type=kwok"
	bad.nodeIP = "0.0.0.0"
	bad.nodePort = 70000
	bad.version = "1.20"
	_, err = joinOptions(bad)
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"--nodes must not be negative", "--capacity cpu=lots", `--register-with-taints "no-effect"`,
		`effect "Sometimes"`, "exclude each other", "--node-ip 0.0.0.0", "--node-port must be a port number", "--kubernetes-version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}

	none := kubeletTestFlags()
	if _, err := joinOptions(none); err == nil || !strings.Contains(err.Error(), "no nodes") {
		t.Errorf("no nodes: %v", err)
	}
}

func TestShardFlags(t *testing.T) {
	f := kubeletTestFlags()
	f.manageLabels, f.shardGroup, f.shardName, f.takeover, f.relayPort = "type=kwok", "tpus", "shard-0", true, 10260
	opts, err := joinOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := opts.Shard; s == nil || s.Group != "tpus" || s.Identity != "shard-0" || !s.Takeover || s.Relay.Port() != 10260 {
		t.Errorf("shard: %+v", opts.Shard)
	}
	group := kubeletTestFlags()
	group.nodes, group.shardGroup = 4, "tpus"
	if opts, err := joinOptions(group); err != nil || opts.Shard == nil || len(opts.Pools) != 1 || opts.Pools[0].Count != 4 {
		t.Errorf("the group's nodes: %+v, %v", opts, err)
	}
	host := kubeletTestFlags()
	host.manageAll, host.shardGroup = true, "tpus"
	if opts, err := joinOptions(host); err != nil || opts.Shard == nil || opts.Shard.Identity == "" {
		t.Errorf("the host's name as the shard's: %+v, %v", opts.Shard, err)
	}
	for name, tc := range map[string]struct {
		set  func(*kubeletFlags)
		want string
	}{
		"takeover alone":          {func(f *kubeletFlags) { f.manageAll, f.takeover = true, true }, "give --shard-group"},
		"a shard of both kinds":   {func(f *kubeletFlags) { f.nodes, f.manageAll, f.shardGroup = 2, true, "tpus" }, "give one of them"},
		"a shard of no nodes":     {func(f *kubeletFlags) { f.shardGroup = "tpus" }, "a shard runs its share of the group's nodes (--nodes"},
		"a group that is no name": {func(f *kubeletFlags) { f.manageAll, f.shardGroup = true, "TPUs" }, `--shard-group "TPUs"`},
		"a relay port that is none": {func(f *kubeletFlags) { f.manageAll, f.shardGroup, f.relayPort = true, "tpus", 70000 },
			"--relay-port must be a port number, got 70000"},
	} {
		f := kubeletTestFlags()
		tc.set(&f)
		if _, err := joinOptions(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
