package provisioner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// Name is the provisioner's name: the StorageClass's provisioner, which the
	// persistent-volume controller copies into a claim's annotation annStorageProvisioner, and
	// the value of annProvisionedBy on the volumes it creates.
	Name = "restartbed.dev/emulated"
	// StorageClassName is the default StorageClass every restartbed cluster has.
	StorageClassName = "standard"

	// annStorageProvisioner is written by kube-controller-manager on a claim whose class's
	// provisioner is not in-tree: which provisioner should make its volume. Read here.
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// annProvisionedBy is written here on every volume; the persistent-volume controller reads it
	// to know who deletes the volume, and this package to know which volumes are its own.
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// annDefaultClass marks the default StorageClass; the DefaultStorageClass admission plugin
	// gives it to claims that name none.
	annDefaultClass = "storageclass.kubernetes.io/is-default-class"

	// volumeRoot is where a volume claims to live on its node (hostPath); no file is written.
	volumeRoot = "/var/lib/restartbed/volumes/"
)

// StorageClass is the cluster's default class: this provisioner, volumes deleted with their
// claims, bound as soon as a claim exists (the emulated storage reaches every node).
func StorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:       Name,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// Claims provisions a volume for each claim that waits for this provisioner.
type Claims struct{ client client.Client }

var _ reconcile.Reconciler = (*Claims)(nil)

// Reconcile creates the claim's volume, named after the claim's UID as CSI provisioners name
// theirs, unless the claim is bound, going, or not this provisioner's.
func (r *Claims) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := r.client.Get(ctx, req.NamespacedName, &pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Annotations[annStorageProvisioner] != Name {
		return reconcile.Result{}, nil
	}
	pv := volumeFor(&pvc)
	if err := r.client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, fmt.Errorf("provisioning a volume for claim %s: %w", req, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Provisioned a volume", "pvc", klog.KObj(&pvc), "pv", pv.Name)
	return reconcile.Result{}, nil
}

// volumeFor is the volume of a claim: its size, access modes, class and mode, reserved for it.
func volumeFor(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	name := "pvc-" + string(pvc.UID)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			StorageClassName:              ptr.Deref(pvc.Spec.StorageClassName, ""),
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: volumeRoot + name, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
		},
	}
}

// Volumes deletes this provisioner's volumes whose claim is gone and whose policy is Delete.
type Volumes struct{ client client.Client }

var _ reconcile.Reconciler = (*Volumes)(nil)

func (r *Volumes) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pv corev1.PersistentVolume
	if err := r.client.Get(ctx, req.NamespacedName, &pv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Annotations[annProvisionedBy] != Name || pv.DeletionTimestamp != nil ||
		pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting a released volume", "pv", klog.KObj(&pv))
	return reconcile.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, &pv))
}

// SetupWithManager registers both controllers.
func SetupWithManager(mgr ctrl.Manager) error {
	claims := &Claims{client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("restartbed-provisioner-claims").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetAnnotations()[annStorageProvisioner] == Name
		}))).Complete(claims); err != nil {
		return err
	}
	volumes := &Volumes{client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).Named("restartbed-provisioner-volumes").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetAnnotations()[annProvisionedBy] == Name
		}))).Complete(volumes)
}
