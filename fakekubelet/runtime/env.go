package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Sources give the ConfigMaps and Secrets that containers' environments and volumes refer to, as the
// kubelet's ConfigMap and Secret managers do: an API NotFound error when one does not exist.
type Sources interface {
	// ConfigMap and Secret read an object of the pod's namespace for the pod, as its node's
	// kubelet may.
	ConfigMap(ctx context.Context, pod *corev1.Pod, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, pod *corev1.Pod, name string) (*corev1.Secret, error)
	// Services lists the cluster's Services, for their environment variables.
	Services() ([]*corev1.Service, error)
	// Token is a token of the pod's service account for audience (empty: the apiserver's),
	// valid for expirationSeconds and bound to the pod.
	Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error)
}

// EnvOf resolves a container's environment as the kubelet does (pkg/kubelet/kubelet_pods.go
// makeEnvironmentVariables): envFrom first, ConfigMaps' and Secrets' keys with their prefix, then
// env in order, each replacing a variable of the same name, then the Services' variables the
// container does not set itself (see serviceEnv) — literal values with $(VAR)
// references expanded, the downward API (fieldRef, resourceFieldRef) filled in from the pod, its
// node's IP and its own IP, and configMapKeyRef and secretKeyRef read through sources. A
// reference that cannot be resolved and is not optional — a missing ConfigMap or Secret, a
// missing key — is the error, with the kubelet's message; the container must not start
// (CreateContainerConfigError). Variables keep the order they are declared in; envFrom's are
// sorted by name.
func EnvOf(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string, sources Sources) ([]string, error) {
	services := map[string]string{}
	if sources != nil {
		svcs, err := sources.Services()
		if err != nil {
			return nil, fmt.Errorf("failed to list services when setting up env vars")
		}
		services = serviceEnv(svcs, pod.Namespace, ptr.Deref(pod.Spec.EnableServiceLinks, true))
	}
	// values are the container's variables; lookup also has the Services', which $(VAR) may
	// refer to.
	values, lookup := map[string]string{}, maps.Clone(services)
	var order []string
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			order = append(order, name)
		}
		values[name], lookup[name] = value, value
	}
	configMaps := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	configMap := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		if sources == nil {
			return nil, fmt.Errorf("couldn't get configMap %s/%s, no kubeClient defined", pod.Namespace, name)
		}
		cm, err := sources.ConfigMap(ctx, pod, name)
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	secret := func(name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		if sources == nil {
			return nil, fmt.Errorf("couldn't get secret %s/%s, no kubeClient defined", pod.Namespace, name)
		}
		s, err := sources.Secret(ctx, pod, name)
		if err == nil {
			secrets[name] = s
		}
		return s, err
	}

	for _, from := range c.EnvFrom {
		data := map[string]string{}
		switch {
		case from.ConfigMapRef != nil:
			cm, err := configMap(from.ConfigMapRef.Name)
			if missingOptional(err, from.ConfigMapRef.Optional) {
				continue
			} else if err != nil {
				return nil, err
			}
			maps.Copy(data, cm.Data)
		case from.SecretRef != nil:
			s, err := secret(from.SecretRef.Name)
			if missingOptional(err, from.SecretRef.Optional) {
				continue
			} else if err != nil {
				return nil, err
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		var v string
		switch {
		case e.Value != "" || e.ValueFrom == nil:
			v = expandVars(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP, hostIP); err != nil {
				return nil, err
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			v = resourceValue(c, e.ValueFrom.ResourceFieldRef)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := configMap(ref.Name)
			if missingOptional(err, ref.Optional) {
				continue
			} else if err != nil {
				return nil, err
			}
			var ok bool
			if v, ok = cm.Data[ref.Key]; !ok {
				if ptr.Deref(ref.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := secret(ref.Name)
			if missingOptional(err, ref.Optional) {
				continue
			} else if err != nil {
				return nil, err
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				if ptr.Deref(ref.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			v = string(b)
		default:
			// fileKeyRef (the EnvFiles gate): the volume's file is not read by restartbed.
			return nil, fmt.Errorf("env %s: fileKeyRef is not supported by restartbed", e.Name)
		}
		set(e.Name, v)
	}
	vars := make([]string, 0, len(order)+len(services))
	for _, name := range order {
		vars = append(vars, name+"="+values[name])
	}
	for _, name := range slices.Sorted(maps.Keys(services)) {
		if _, ok := values[name]; !ok {
			vars = append(vars, name+"="+services[name])
		}
	}
	return vars, nil
}

// missingOptional reports a ConfigMap or Secret that does not exist where the reference to it
// is optional: the kubelet then leaves the reference out.
func missingOptional(err error, optional *bool) bool {
	return apierrors.IsNotFound(err) && ptr.Deref(optional, false)
}

// fieldValue resolves a downward-API field path.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return metadataField(pod, path)
}

// resourceValue resolves a resourceFieldRef against the container's own resources; a missing
// limit is the node's allocatable in a real kubelet, and 0 here.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) string {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	name, list := ref.Resource, c.Resources.Limits
	if after, ok := strings.CutPrefix(name, "requests."); ok {
		name, list = after, c.Resources.Requests
	} else {
		name = strings.TrimPrefix(name, "limits.")
	}
	q := list[corev1.ResourceName(name)]
	if name == string(corev1.ResourceCPU) {
		return fmt.Sprint((q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue())
	}
	return fmt.Sprint((q.Value() + divisor.Value() - 1) / divisor.Value())
}

// expandArgs expands $(VAR) in a command and its args from the container's environment.
func expandArgs(argv, env []string) []string {
	values := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			values[k] = v
		}
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = expandVars(a, values)
	}
	return out
}
