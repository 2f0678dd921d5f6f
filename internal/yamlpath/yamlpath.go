// Package yamlpath relates YAML node trees (go.yaml.in/yaml/v3) to the field paths users read in
// messages — "spec.replicatedJobs[0].template.spec.backoffLimit", as the apiserver writes them —
// and to lines: find the node a path names, name the path at a line, turn yaml.v3's errors into
// line-numbered messages without Go type names, and decode a manifest's node into an object. The
// scenario loader and validate share it.
package yamlpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Join appends a mapping key to a path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends a sequence index to a path.
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// At finds the node at a path of mapping keys (string) and sequence indexes (int); it returns the
// deepest node found, so a problem with an absent field points at its parent.
func At(node *yaml.Node, path ...any) *yaml.Node {
	for _, step := range path {
		var next *yaml.Node
		switch s := step.(type) {
		case string:
			next = Value(node, s)
		case int:
			if node.Kind == yaml.SequenceNode && s >= 0 && s < len(node.Content) {
				next = node.Content[s]
			}
		}
		if next == nil {
			return node
		}
		node = next
	}
	return node
}

// Value is the value of a mapping's key, or nil.
func Value(node *yaml.Node, key string) *yaml.Node {
	if node == nil || node.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == key {
			return node.Content[i+1]
		}
	}
	return nil
}

// Steps splits a field path as Kubernetes writes it — dots between keys, [i] for list indexes,
// [key] for map keys that hold dots or slashes — into mapping keys (string) and indexes (int).
func Steps(path string) []any {
	var steps []any
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(steps, path[1:])
			}
			inner := path[1:end]
			if i, err := strconv.Atoi(inner); err == nil {
				steps = append(steps, i)
			} else {
				steps = append(steps, inner)
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, path[:end])
			path = path[end:]
		}
	}
	return steps
}

// Find is At for a field path as Kubernetes writes it (see Steps).
func Find(node *yaml.Node, path string) *yaml.Node { return At(node, Steps(path)...) }

// PathAt returns the path of the deepest value that starts at the line, or "".
func PathAt(node *yaml.Node, line int, path string) string {
	found := ""
	switch node.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i], node.Content[i+1]
			p := Join(path, key.Value)
			if key.Line == line || value.Line == line {
				found = p
			}
			if deeper := PathAt(value, line, p); deeper != "" {
				found = deeper
			}
		}
	case yaml.SequenceNode:
		for i, item := range node.Content {
			p := Index(path, i)
			if deeper := PathAt(item, line, p); deeper != "" {
				found = deeper
			} else if item.Line == line && found == "" {
				found = p
			}
		}
	}
	return found
}

// CaseHint says which of the names a wrongly cased key meant, as " (keys are case-sensitive: did
// you mean "spec"?)", or "".
func CaseHint(key string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return fmt.Sprintf(" (keys are case-sensitive: did you mean %q?)", n)
		}
	}
	return ""
}

// LineMessage is one of yaml.v3's messages with the line it names (0 when it names none).
type LineMessage struct {
	Line    int
	Message string
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Messages splits a yaml.v3 error into its messages (a TypeError holds several), each with its
// line and reworded by Friendly.
func Messages(err error) []LineMessage {
	var msgs []string
	var typeErr *yaml.TypeError
	if errors.As(err, &typeErr) {
		msgs = typeErr.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make([]LineMessage, 0, len(msgs))
	for _, m := range msgs {
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			line, _ := strconv.Atoi(g[1]) // the pattern matched digits only
			out = append(out, LineMessage{line, Friendly(g[2])})
			continue
		}
		out = append(out, LineMessage{0, Friendly(strings.TrimPrefix(m, "yaml: "))})
	}
	return out
}

// Friendly rewords yaml.v3's messages that name Go types or hide a tab.
func Friendly(msg string) string {
	if strings.Contains(msg, "found character that cannot start any token") || strings.Contains(msg, "found a tab character") {
		return msg + " (a tab? YAML indents with spaces only)"
	}
	if i := strings.Index(msg, " into "); strings.HasPrefix(msg, "cannot unmarshal ") && i > 0 {
		what := strings.TrimPrefix(msg[:i], "cannot unmarshal ")
		into := msg[i+len(" into "):]
		switch {
		case strings.Contains(into, "int"):
			into = "a number"
		case into == "bool":
			into = "true or false"
		case into == "string":
			into = "a string"
		case strings.HasPrefix(into, "[]"):
			into = "a list"
		case strings.HasPrefix(into, "map["), strings.Contains(into, "."):
			into = "a mapping"
		}
		return fmt.Sprintf("got %s, want %s", strings.ReplaceAll(what, "!!", ""), into)
	}
	return msg
}

// ToUnstructured converts a manifest's node to an unstructured object through its JSON form, as
// the apiserver reads a manifest; it fails as unstructured.Unstructured.UnmarshalJSON does, on a
// missing kind for one.
func ToUnstructured(n *yaml.Node) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// FileProblem is a path Files could not use.
type FileProblem struct {
	Path    string
	Message string
}

// Files expands paths into YAML files: a file stands for itself, a directory for its *.yaml and
// *.yml files (not its subdirectories), in name order. A path that cannot be read, or a directory
// with no YAML file, is a problem.
func Files(paths []string) ([]string, []FileProblem) {
	var files []string
	var problems []FileProblem
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			problems = append(problems, FileProblem{p, "cannot read: " + ReadError(err)})
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			problems = append(problems, FileProblem{p, "cannot read the directory: " + ReadError(err)})
			continue
		}
		n := len(files)
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		if len(files) == n {
			problems = append(problems, FileProblem{p, "the directory has no .yaml or .yml files"})
		}
	}
	return files, problems
}

// ReadError is a file-reading error without the path an *os.PathError repeats.
func ReadError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
