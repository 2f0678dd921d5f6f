package runtime

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// expandVars expands variable references as the API documents them for env values, command and
// args: $(NAME) becomes the value of NAME when values defines it and stays as written when it
// does not; $$ is a literal $, so $$(NAME) is the text $(NAME); any other $ stays as it is, as
// does a $( that is never closed.
func expandVars(s string, values map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := values[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// metadataField resolves the downward API's metadata fields (fieldRef.fieldPath):
// metadata.name, .namespace, .uid, .labels and .annotations whole (one key="value" line each,
// sorted) or one key of them (metadata.labels['KEY']).
func metadataField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for field, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, field+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// formatMap renders labels or annotations as the downward API does.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}
