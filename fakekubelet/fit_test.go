package fakekubelet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features"
	"k8s.io/utils/ptr"
)

func testNode(name string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}},
		Status:     corev1.NodeStatus{Allocatable: DefaultCapacity()},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func testPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func requesting(list corev1.ResourceList) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = list }
}

func tpus(n string) corev1.ResourceList {
	return corev1.ResourceList{TPUResource: resource.MustParse(n)}
}

func usageOf(pods ...*corev1.Pod) nodeUsage {
	var u nodeUsage
	for _, p := range pods {
		u.add(p)
	}
	return u
}

func TestFit(t *testing.T) {
	framework, err := nodedeclaredfeatures.New(features.AllFeatures)
	if err != nil {
		t.Fatal(err)
	}
	racPod := func(p *corev1.Pod) {
		p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
			Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
	}
	declaring := func(n *corev1.Node) { n.Status.DeclaredFeatures = []string{"RestartAllContainersOnContainerExits"} }
	cases := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		used nodeUsage
		want []string
	}{
		{name: "fits", pod: testPod(), node: testNode("n")},
		{
			name: "cordoned",
			pod:  testPod(),
			node: testNode("n", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			want: []string{reasonUnschedulable},
		},
		{
			name: "node selector",
			pod:  testPod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "b"} }),
			node: testNode("n"),
			want: []string{reasonAffinity},
		},
		{
			name: "required node affinity",
			pod: testPod(func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}},
					}}},
				}}
			}),
			node: testNode("n"),
			want: []string{reasonAffinity},
		},
		{
			name: "untolerated NoSchedule taint",
			pod:  testPod(),
			node: testNode("n", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
			}),
			want: []string{reasonUntoleratedTaint},
		},
		{
			name: "tolerated taint",
			pod: testPod(func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			}),
			node: testNode("n", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
			}),
		},
		{
			name: "PreferNoSchedule does not block",
			pod:  testPod(),
			node: testNode("n", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			}),
		},
		{
			name: "four TPUs on a four-TPU node",
			pod:  testPod(requesting(tpus("4"))),
			node: testNode("n"),
		},
		{
			name: "one pod of four TPUs per node",
			pod:  testPod(requesting(tpus("4"))),
			node: testNode("n"),
			used: usageOf(testPod(requesting(tpus("4")))),
			want: []string{"Insufficient google.com/tpu"},
		},
		{
			name: "every missing resource is named, sorted",
			pod:  testPod(requesting(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), TPUResource: resource.MustParse("5")})),
			node: testNode("n"),
			want: []string{"Insufficient cpu", "Insufficient google.com/tpu"},
		},
		{
			name: "pod count",
			pod:  testPod(),
			node: testNode("n", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1") }),
			used: usageOf(testPod()),
			want: []string{reasonTooManyPods},
		},
		{
			name: "RestartAllContainers needs a node that declares it",
			pod:  testPod(racPod),
			node: testNode("n"),
			want: []string{"node declared features check failed - unsatisfied requirements: RestartAllContainersOnContainerExits"},
		},
		{
			name: "RestartAllContainers on a declaring node",
			pod:  testPod(racPod),
			node: testNode("n", declaring),
		},
		{
			name: "the first failing filter wins, as in the scheduler",
			pod:  testPod(requesting(tpus("8")), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "b"} }),
			node: testNode("n"),
			want: []string{reasonAffinity},
		},
	}
	checker := &fitChecker{features: framework}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checker.fit(tc.pod, tc.node, tc.used)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fit() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnschedulableMessage(t *testing.T) {
	got := unschedulableMessage(4, map[string][]string{
		"a": {reasonAffinity},
		"b": {"Insufficient google.com/tpu"},
		"c": {"Insufficient cpu", "Insufficient google.com/tpu"},
		"d": {"Insufficient google.com/tpu"},
	})
	want := "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, 3 Insufficient google.com/tpu."
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unschedulableMessage() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("0/0 nodes are available.", unschedulableMessage(0, nil)); diff != "" {
		t.Errorf("no nodes (-want +got):\n%s", diff)
	}
}

func TestValidatePools(t *testing.T) {
	err := ValidatePools([]NodePool{
		{Name: "pool-a", Count: 2},
		{Name: "Pool_B", Count: -1, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}},
		{Name: "pool-a", Count: 1},
	})
	if err == nil {
		t.Fatal("ValidatePools() accepted bad pools")
	}
	for _, want := range []string{
		`pools[1].name "Pool_B": a lowercase RFC 1123 label`,
		"pools[1].count: must not be negative, got -1",
		"pools[1].capacity[cpu]: must not be negative, got -1",
		`pools[2].name "pool-a": another pool has this name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestAddressPlan(t *testing.T) {
	for _, tc := range []struct {
		index    int
		wantIP   string
		wantCIDR string
	}{
		{0, "172.16.0.1", "10.64.0.0/24"},
		{1, "172.16.0.2", "10.64.1.0/24"},
		{300, "172.16.1.45", "10.65.44.0/24"},
		{maxNodes - 1, "172.16.64.0", "10.127.255.0/24"},
	} {
		if got := internalIP(tc.index).String(); got != tc.wantIP {
			t.Errorf("internalIP(%d) = %s, want %s", tc.index, got, tc.wantIP)
		}
		if got := podCIDR(tc.index).String(); got != tc.wantCIDR {
			t.Errorf("podCIDR(%d) = %s, want %s", tc.index, got, tc.wantCIDR)
		}
	}
}
