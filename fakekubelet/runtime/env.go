package runtime

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// EnvOf resolves a container's environment as the kubelet does: values with $(VAR) references
// to earlier variables expanded, and the downward API (fieldRef, resourceFieldRef) filled in from
// the pod, its node's IP and its own IP. References to ConfigMaps and Secrets are not resolved;
// they are reported as errors naming the variable, so a caller can say what is missing.
func EnvOf(pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]string, error) {
	vars := make([]string, 0, len(c.Env))
	values := map[string]string{}
	var problems []string
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expandVars(e.Value, values)
		case e.ValueFrom.FieldRef != nil:
			var err error
			v, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP, hostIP)
			if err != nil {
				problems = append(problems, fmt.Sprintf("env %s: %v", e.Name, err))
				continue
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			v = resourceValue(c, e.ValueFrom.ResourceFieldRef)
		default:
			problems = append(problems, fmt.Sprintf("env %s: configMapKeyRef and secretKeyRef are not resolved by restartbed", e.Name))
			continue
		}
		values[e.Name] = v
		vars = append(vars, e.Name+"="+v)
	}
	if len(problems) > 0 {
		return vars, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return vars, nil
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
