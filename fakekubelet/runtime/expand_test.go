package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases of the API's documentation of $(VAR) references, and the edges around them.
func TestExpandVars(t *testing.T) {
	values := map[string]string{"A": "alpha", "B": "$(A)", "EMPTY": ""}
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x-$(A)-$(A)-y", "x-alpha-alpha-y"},
		{"$(B)", "$(A)"}, // values are not expanded again
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$$", "$"},
		{"$A", "$A"},
		{"cost: 5$", "cost: 5$"},
		{"$(A", "$(A"},
		{"$(EMPTY)!", "!"},
		{"$()", "$()"},
	}
	for _, tc := range cases {
		if got := expandVars(tc.in, values); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMetadataField(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1",
		Labels:      map[string]string{"b": "2", "a": "1"},
		Annotations: map[string]string{"note": `say "hi"`}}}
	cases := []struct{ path, want, wantErr string }{
		{path: "metadata.name", want: "p"},
		{path: "metadata.namespace", want: "ns"},
		{path: "metadata.uid", want: "u-1"},
		{path: "metadata.labels", want: "a=\"1\"\nb=\"2\""},
		{path: "metadata.annotations", want: `note="say \"hi\""`},
		{path: "metadata.labels['b']", want: "2"},
		{path: "metadata.annotations['missing']", want: ""},
		{path: "metadata.generation", wantErr: "unsupported fieldPath: metadata.generation"},
	}
	for _, tc := range cases {
		got, err := metadataField(pod, tc.path)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("metadataField(%q) error = %v, want %q", tc.path, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("metadataField(%q): %v", tc.path, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("metadataField(%q) (-want +got):\n%s", tc.path, diff)
		}
	}
}
