package fakekubelet

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodSources: the index a ConfigMap's or Secret's change finds its pods by names every
// source a volume projects, directly or in a projected volume, and nothing else.
func TestPodSources(t *testing.T) {
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("settings")}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("more")}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: ref("settings")}},
			{DownwardAPI: &corev1.DownwardAPIProjection{}},
		}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	got, err := podSources(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ConfigMap/ns/settings", "Secret/ns/creds", "ConfigMap/ns/more", "Secret/ns/settings"}
	if !slices.Equal(got, want) {
		t.Errorf("podSources = %q, want %q", got, want)
	}
	if got, _ := podSources("not a pod"); got != nil {
		t.Errorf("podSources of another object = %q, want none", got)
	}
}
