package runtime

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// Files of the service-account volume, under its mount path.
const (
	saNamespaceFile = "namespace"
	saTokenFile     = "token"
)

// volume creates a pod volume; r.mu is held. emptyDir and every kind restartbed does not fill
// start empty; hostPath is shared by the pods of one node; a projected volume carries the
// service-account files a program reads (namespace, token) and its downward-API items.
func (r *Runtime) volume(sb *sandbox, pod *corev1.Pod, v *corev1.Volume) *vfs.Volume {
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
	if v.Projected == nil {
		return vol
	}
	root := vol.FS(sb.fs)
	for _, src := range v.Projected.Sources {
		if src.ServiceAccountToken != nil {
			_ = root.WriteFile("/"+src.ServiceAccountToken.Path, []byte("restartbed-token-"+string(pod.UID)))
		}
		if src.DownwardAPI != nil {
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef == nil {
					continue
				}
				if value, err := fieldValue(pod, item.FieldRef.FieldPath, sb.ip, ""); err == nil {
					_ = root.WriteFile("/"+item.Path, []byte(value))
				}
			}
		}
	}
	return vol
}
