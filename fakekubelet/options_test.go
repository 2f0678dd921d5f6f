package fakekubelet

import (
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
