package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/container"
	"github.com/restartbed/restartbed/fakekubelet/vfs"
)

// A projected file: what the kubelet's atomic writer puts into a configMap, secret, downwardAPI
// or projected volume (pkg/volume/configmap, secret, downwardapi, projected).
type projectedFile struct {
	data []byte
	mode fs.FileMode
}

// MountError is a volume the kubelet cannot set up: the pod's sandbox is not created until it can.
type MountError struct {
	Volume string
	Err    error
}

func (e *MountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// projects reports whether a volume's content comes from the API (and so is refreshed).
func projects(v *corev1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// projection computes the files of a configMap, secret, downwardAPI or projected volume, as the
// kubelet's volume plugins do; a required ConfigMap, Secret or key that is missing is an error
// with their message. ip is the pod's IP for downward-API items.
func projection(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, sources Sources, ip string) (map[string]projectedFile, error) {
	files := map[string]projectedFile{}
	switch {
	case v.ConfigMap != nil:
		return files, configMapFiles(ctx, files, pod, sources, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
	case v.Secret != nil:
		return files, secretFiles(ctx, files, pod, sources, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
	case v.DownwardAPI != nil:
		return files, downwardFiles(files, pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, ip)
	case v.Projected != nil:
		def := v.Projected.DefaultMode
		for _, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				err = configMapFiles(ctx, files, pod, sources, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
			case src.Secret != nil:
				err = secretFiles(ctx, files, pod, sources, src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
			case src.DownwardAPI != nil:
				err = downwardFiles(files, pod, src.DownwardAPI.Items, def, ip)
			case src.ServiceAccountToken != nil:
				var token string
				token, err = tokenFor(ctx, pod, sources, src.ServiceAccountToken)
				files[src.ServiceAccountToken.Path] = projectedFile{data: []byte(token), mode: modeOf(nil, def)}
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// tokenFor asks the TokenRequest API for the pod's service-account token, bound to the pod, as
// the kubelet's token manager does (pkg/kubelet/token); without sources it is a placeholder.
func tokenFor(ctx context.Context, pod *corev1.Pod, sources Sources, p *corev1.ServiceAccountTokenProjection) (string, error) {
	if sources == nil {
		return serviceAccountToken(pod), nil
	}
	expiration := ptr.Deref(p.ExpirationSeconds, 3600)
	token, err := sources.Token(ctx, pod, p.Audience, expiration)
	if err != nil {
		return "", fmt.Errorf("failed to fetch token: %w", err)
	}
	return token, nil
}

// modeOf is an item's mode, else the volume's default, else 0644.
func modeOf(item, def *int32) fs.FileMode {
	switch {
	case item != nil:
		return fs.FileMode(*item).Perm()
	case def != nil:
		return fs.FileMode(*def).Perm()
	}
	return fs.FileMode(corev1.ConfigMapVolumeSourceDefaultMode)
}

// keyed projects the keys of a ConfigMap's or Secret's data: all of them, or the items'. A
// missing item key is skipped when the source is optional, else the error missing names it.
func keyed(files map[string]projectedFile, data map[string][]byte, items []corev1.KeyToPath, def *int32, optional bool, missing string) error {
	if len(items) == 0 {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			files[k] = projectedFile{data: data[k], mode: modeOf(nil, def)}
		}
		return nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf(missing, it.Key)
		}
		files[it.Path] = projectedFile{data: d, mode: modeOf(it.Mode, def)}
	}
	return nil
}

func configMapFiles(ctx context.Context, files map[string]projectedFile, pod *corev1.Pod, sources Sources, name string,
	items []corev1.KeyToPath, optional *bool, def *int32) error {
	if sources == nil {
		return fmt.Errorf("couldn't get configMap %s/%s: no source of ConfigMaps", pod.Namespace, name)
	}
	cm, err := sources.ConfigMap(ctx, pod, name)
	if missingOptional(err, optional) {
		return nil
	} else if err != nil {
		return err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return keyed(files, data, items, def, ptr.Deref(optional, false), "configmap references non-existent config key: %s")
}

func secretFiles(ctx context.Context, files map[string]projectedFile, pod *corev1.Pod, sources Sources, name string,
	items []corev1.KeyToPath, optional *bool, def *int32) error {
	if sources == nil {
		return fmt.Errorf("couldn't get secret %s/%s: no source of Secrets", pod.Namespace, name)
	}
	s, err := sources.Secret(ctx, pod, name)
	if missingOptional(err, optional) {
		return nil
	} else if err != nil {
		return err
	}
	return keyed(files, s.Data, items, def, ptr.Deref(optional, false), "references non-existent secret key: %s")
}

// downwardFiles projects downward-API items: fieldRef (as for env, plus every label or
// annotation as key="value" lines) and resourceFieldRef.
func downwardFiles(files map[string]projectedFile, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def *int32, ip string) error {
	for _, it := range items {
		var value string
		switch {
		case it.FieldRef != nil && (it.FieldRef.FieldPath == "metadata.labels" || it.FieldRef.FieldPath == "metadata.annotations"):
			m := pod.Labels
			if it.FieldRef.FieldPath == "metadata.annotations" {
				m = pod.Annotations
			}
			var lines []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
			}
			value = strings.Join(lines, "\n")
		case it.FieldRef != nil:
			v, err := fieldValue(pod, it.FieldRef.FieldPath, ip, "")
			if err != nil {
				return err
			}
			value = v
		case it.ResourceFieldRef != nil:
			c := container.SpecOf(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return fmt.Errorf("container %q not found in pod", it.ResourceFieldRef.ContainerName)
			}
			value = resourceValue(c, it.ResourceFieldRef)
		}
		files[it.Path] = projectedFile{data: []byte(value), mode: modeOf(it.Mode, def)}
	}
	return nil
}

// writeProjection replaces a volume's content with files: what the source no longer has goes,
// as the kubelet's atomic writer swaps the whole payload.
func writeProjection(root *vfs.FS, files map[string]projectedFile) {
	entries, _ := root.ReadDir("/") // a volume's root is a directory
	for _, e := range entries {
		_ = root.Remove("/"+e.Name(), true) // read from the listing just made
	}
	for p, f := range files {
		full := path.Join("/", p)
		// An emptied volume, and paths the apiserver validated (relative, no ".."): the writes
		// fail only where two items' paths collide, and then the first one's stays.
		_ = root.Mkdir(path.Dir(full), 0o755, true)
		_ = root.WriteFile(full, f.data)
		_ = root.Chmod(full, f.mode)
	}
}
