package runtime

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// ServiceAccountDir is where a pod's service-account token volume is mounted.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// serviceAccountVolume holds what the apiserver's kube-api-access volume would give the pod:
// its namespace, a token and a CA bundle.
func serviceAccountVolume(sb *sandbox, pod *corev1.Pod) *vfs.Volume {
	vol := sb.fs.NewVolume()
	root := vol.FS(sb.fs)
	_ = root.WriteFile("/namespace", []byte(pod.Namespace))        // a new volume's root: the write cannot fail
	_ = root.WriteFile("/token", []byte(serviceAccountToken(pod))) // as above
	_ = root.WriteFile("/ca.crt", nil)                             // as above
	return vol
}

// volume creates a pod volume; r.mu is held. emptyDir and every kind restartbed does not fill
// start empty; hostPath is shared by the pods of one node; a persistentVolumeClaim by every pod
// of the cluster that mounts the claim, and outlives them (restartbed has no storage
// provisioner: any claim is taken as bound and ReadWriteMany); configMap, secret, downwardAPI
// and projected volumes hold their projection, computed before (projected, by volume name).
func (r *Runtime) volume(sb *sandbox, pod *corev1.Pod, v *corev1.Volume, projected map[string]map[string]projectedFile) *vfs.Volume {
	if v.PersistentVolumeClaim != nil {
		key := pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
		if vol := r.claimStorage[key]; vol != nil {
			return vol
		}
		vol := sb.fs.NewVolume()
		r.claimStorage[key] = vol
		return vol
	}
	if v.HostPath != nil {
		byPath := r.nodeStorage[sb.node]
		if byPath == nil {
			byPath = map[string]*vfs.Volume{}
			r.nodeStorage[sb.node] = byPath
		}
		if vol := byPath[v.HostPath.Path]; vol != nil {
			return vol
		}
		vol := sb.fs.NewVolume()
		byPath[v.HostPath.Path] = vol
		return vol
	}
	vol := sb.fs.NewVolume()
	if files, ok := projected[v.Name]; ok {
		writeProjection(vol.FS(sb.fs), files)
	}
	return vol
}

// serviceAccountToken is the token restartbed's pods find in their service-account files.
func serviceAccountToken(pod *corev1.Pod) string { return "restartbed-token-" + string(pod.UID) }

// writeNames writes the kubelet's name files into a container's filesystem, except where the
// container mounts a volume of its own (the kubelet then leaves /etc/hosts to it).
func writeNames(fs *vfs.FS, names map[string][]byte, mounts []corev1.VolumeMount) {
	for p, content := range names {
		if covered(p, mounts) {
			continue
		}
		// A fresh tree with /etc, and no volume over the file (covered): the writes cannot fail.
		_ = fs.Mkdir(path.Dir(p), 0o755, true)
		_ = fs.WriteFile(p, content)
	}
}
