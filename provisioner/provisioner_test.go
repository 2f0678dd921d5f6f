package provisioner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func claim(mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "u1", Annotations: map[string]string{annStorageProvisioner: Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(StorageClassName),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
	if mutate != nil {
		mutate(pvc)
	}
	return pvc
}

func TestClaims(t *testing.T) {
	cases := []struct {
		name       string
		pvc        *corev1.PersistentVolumeClaim
		wantVolume bool
	}{
		{name: "waiting for this provisioner", pvc: claim(nil), wantVolume: true},
		{name: "bound already", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "pv-x" })},
		{name: "another provisioner's", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations[annStorageProvisioner] = "ebs.csi.aws.com" })},
		{name: "no provisioner yet", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations = nil })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.pvc).Build()
			r := &Claims{client: c}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc.pvc)}
			for range 2 { // a second pass finds the volume there and is content
				if _, err := r.Reconcile(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			var pvs corev1.PersistentVolumeList
			if err := c.List(context.Background(), &pvs); err != nil {
				t.Fatal(err)
			}
			if !tc.wantVolume {
				if len(pvs.Items) != 0 {
					t.Errorf("provisioned %d volumes, want none", len(pvs.Items))
				}
				return
			}
			if len(pvs.Items) != 1 {
				t.Fatalf("provisioned %d volumes, want 1", len(pvs.Items))
			}
			got := pvs.Items[0]
			// Written out, not computed by the code under test: the claim's size, modes and
			// class, a Delete policy, bound to the claim, on the node's virtual host path.
			want := corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				StorageClassName:              StorageClassName,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "data", UID: "u1"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: "/var/lib/restartbed/volumes/pvc-u1", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
			}
			if diff := cmp.Diff(want, got.Spec); diff != "" {
				t.Errorf("volume spec (-want +got):\n%s", diff)
			}
			if got.Name != "pvc-u1" || got.Annotations[annProvisionedBy] != Name {
				t.Errorf("volume %s annotated %v, want pvc-u1 provisioned by %s", got.Name, got.Annotations, Name)
			}
			if q := got.Spec.Capacity[corev1.ResourceStorage]; q.String() != "2Gi" {
				t.Errorf("capacity %s, want the claim's 2Gi", q.String())
			}
		})
	}
}

func TestVolumes(t *testing.T) {
	pv := func(phase corev1.PersistentVolumePhase, policy corev1.PersistentVolumeReclaimPolicy, by string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{annProvisionedBy: by}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy},
			Status:     corev1.PersistentVolumeStatus{Phase: phase},
		}
	}
	cases := []struct {
		name        string
		pv          *corev1.PersistentVolume
		wantDeleted bool
	}{
		{name: "released, Delete, ours", pv: pv(corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete, Name), wantDeleted: true},
		{name: "still bound", pv: pv(corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, Name)},
		{name: "Retain", pv: pv(corev1.VolumeReleased, corev1.PersistentVolumeReclaimRetain, Name)},
		{name: "not ours", pv: pv(corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete, "ebs.csi.aws.com")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.pv).WithStatusSubresource(tc.pv).Build()
			r := &Volumes{client: c}
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "pv"}}); err != nil {
				t.Fatal(err)
			}
			err := c.Get(context.Background(), types.NamespacedName{Name: "pv"}, &corev1.PersistentVolume{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Errorf("deleted = %v (%v), want %v", deleted, err, tc.wantDeleted)
			}
		})
	}
}
