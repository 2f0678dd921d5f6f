package fakekubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestManagedNodes chooses nodes with KWOK's rules: all, one by name, or by annotation and label
// selectors together; nothing by default.
func TestManagedNodes(t *testing.T) {
	node := func(name string, annotations, lbls map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: lbls}}
	}
	kwok := node("kwok-0", map[string]string{"kwok.x-k8s.io/node": "fake"}, map[string]string{"type": "kwok"})
	other := node("other", nil, map[string]string{"type": "kwok"})
	fake := labels.SelectorFromSet(labels.Set{"kwok.x-k8s.io/node": "fake"})
	kwokType := labels.SelectorFromSet(labels.Set{"type": "kwok"})
	for _, tc := range []struct {
		name        string
		m           ManagedNodes
		kwok, other bool
	}{
		{"nothing by default", ManagedNodes{}, false, false},
		{"all", ManagedNodes{All: true}, true, true},
		{"by name", ManagedNodes{Name: "other"}, false, true},
		{"by annotation", ManagedNodes{Annotations: fake}, true, false},
		{"by label", ManagedNodes{Labels: kwokType}, true, true},
		{"by both", ManagedNodes{Annotations: fake, Labels: kwokType}, true, false},
	} {
		if got := tc.m.Matches(kwok); got != tc.kwok {
			t.Errorf("%s: kwok-0 matches %v, want %v", tc.name, got, tc.kwok)
		}
		if got := tc.m.Matches(other); got != tc.other {
			t.Errorf("%s: other matches %v, want %v", tc.name, got, tc.other)
		}
		if err := tc.m.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if (ManagedNodes{All: true, Labels: kwokType}).Validate() == nil || (ManagedNodes{All: true, Name: "x"}).Validate() == nil {
		t.Error("all nodes with a selector or a name was accepted")
	}
}

// TestValidatePools: pools name their nodes <name>-<i>, or <namePrefix>-<i>; two pools may not
// name nodes alike.
func TestValidatePools(t *testing.T) {
	cases := []struct {
		name  string
		pools []NodePool
		want  string
	}{
		{"named apart", []NodePool{{Name: "a", Count: 1}, {Name: "b", Count: 1, NamePrefix: "b-t1"}}, ""},
		{"the same name", []NodePool{{Name: "a"}, {Name: "a"}}, `pools[1].name "a": another pool has this name`},
		{"a prefix another pool names its nodes with", []NodePool{{Name: "a", NamePrefix: "x"}, {Name: "x"}}, "pools[1]: another pool's nodes are named x-<i> too"},
		{"a prefix that is no DNS label", []NodePool{{Name: "a", NamePrefix: "A_b"}}, `pools[0].namePrefix "A_b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePools(tc.pools)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidatePools: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidatePools: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if got := (NodePool{Name: "tpu", NamePrefix: "tpu-t3"}).NodeName(2); got != "tpu-t3-2" {
		t.Errorf("NodeName with a prefix = %q, want tpu-t3-2", got)
	}
}
