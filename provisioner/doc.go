// Package provisioner is restartbed's dynamic storage provisioner: the default StorageClass of a
// restartbed cluster, and the controller that gives every claim of that class a
// PersistentVolume of its own, as a cluster's CSI provisioner does (kind ships
// local-path-provisioner for the same purpose). kube-controller-manager's persistent-volume
// controller then binds the two, the scheduler places the claim's pods, and PVC protection and
// reclaiming work as in a cluster.
//
// It owns the StorageClass and the volumes it provisions (annotated with its name), and deletes
// a volume of the Delete reclaim policy once its claim is gone. It stores nothing: the emulated
// kubelets keep a claim's files. It must not bind volumes to claims (the controller-manager does)
// nor touch volumes it did not provision.
package provisioner
