package validate

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restartbed/restartbed/internal/yamlpath"
)

// Document is one YAML document of a manifest file.
type Document struct {
	File string
	// Line is the document's first line in File.
	Line int
	// Root is the document's mapping as written, or nil when it could not be parsed.
	Root *yaml.Node
	// Fixed is Root after the parse and draft checks mended what they reported (placeholders
	// replaced, draft names released, wrongly cased keys renamed, unknown keys dropped), so that
	// the apiserver and the readiness checks judge everything else. Its nodes keep Root's lines.
	Fixed *yaml.Node
	// Object is Fixed as a Kubernetes object, or nil when it is not one (no apiVersion or kind).
	Object *unstructured.Unstructured
	// placeholders are the paths of the values that were placeholders.
	placeholders []string
}

// placeholderUnder reports whether a placeholder was replaced at or under the path, so that a
// check does not judge a value the document left to the reader.
func (d *Document) placeholderUnder(path string) bool {
	return slices.ContainsFunc(d.placeholders, func(p string) bool {
		return p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[")
	})
}

// Kind is the document's kind, or "".
func (d *Document) Kind() string {
	if d.Object == nil {
		return ""
	}
	return d.Object.GetKind()
}

// lineOf is the line of the node at a field path in the document, or of its deepest ancestor
// that exists.
func (d *Document) lineOf(path string) int {
	if d.Fixed == nil {
		return d.Line
	}
	if n := yamlpath.Find(d.Fixed, path); n != nil && n.Line > 0 {
		return n.Line
	}
	return d.Line
}

// finding is a finding at a field path of the document, at the document's first line when the
// path is "".
func (d *Document) finding(sev Severity, check Check, path, msg string) Finding {
	line := d.Line
	if path != "" {
		line = d.lineOf(path)
	}
	return Finding{File: d.File, Line: line, Severity: sev, Path: path, Message: msg, Check: check}
}

// placeholderLine is a line that holds nothing but an ellipsis, as design documents write to
// elide fields.
var placeholderLine = regexp.MustCompile(`^\s*(\.\.\.|…)\s*(#.*)?$`)

// separator is a YAML document separator line.
var separator = regexp.MustCompile(`^---(\s.*)?$`)

// maxRecoveries bounds how many placeholder lines one document may have blanked.
const maxRecoveries = 50

// readDocuments reads a manifest file into documents, reporting what cannot be parsed. A line
// holding only "..." is reported as a placeholder and parsed around, so that one elision does not
// hide the rest of a design document's manifest.
func readDocuments(file string, add func(Finding)) []*Document {
	data, err := os.ReadFile(file)
	if err != nil {
		add(Finding{File: file, Severity: Error, Check: CheckParse, Message: "cannot read: " + yamlpath.ReadError(err)})
		return nil
	}
	return parseDocuments(file, data, add)
}

// parseDocuments splits a file's text into documents and parses each.
func parseDocuments(file string, data []byte, add func(Finding)) []*Document {
	lines := strings.Split(string(data), "\n")
	var docs []*Document
	start := 0
	flush := func(end int) {
		if doc := parseDocument(file, lines, start, end, add); doc != nil {
			docs = append(docs, doc)
		}
	}
	for i, l := range lines {
		if separator.MatchString(l) {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return docs
}

// parseDocument parses lines[start:end]; the text is padded with empty lines so that yaml.v3's
// line numbers are the file's.
func parseDocument(file string, all []string, start, end int, add func(Finding)) *Document {
	lines := slices.Clone(all[start:end])
	if !slices.ContainsFunc(lines, func(l string) bool { t := strings.TrimSpace(l); return t != "" && !strings.HasPrefix(t, "#") }) {
		return nil // only comments
	}
	doc := &Document{File: file, Line: start + 1}
	fail := func(line int, msg string) {
		add(Finding{File: file, Line: line, Severity: Error, Check: CheckParse, Message: msg})
	}
	for attempt := 0; ; attempt++ {
		text := strings.Repeat("\n", start) + strings.Join(lines, "\n")
		var root yaml.Node
		err := yaml.Unmarshal([]byte(text), &root)
		if err == nil {
			if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
				doc.Root = root.Content[0]
			}
			break
		}
		msgs := yamlpath.Messages(err)
		line := msgs[0].Line
		// An elision line near the error: report it, blank it and parse again.
		if i := elisionNear(lines, line-1-start); i >= 0 && attempt < maxRecoveries {
			fail(start+i+1, "placeholder \"...\": the document elides fields here; write them out or remove the line")
			lines[i] = ""
			continue
		}
		if tabs := tabLines(lines); len(tabs) > 0 {
			for _, i := range tabs {
				fail(start+i+1, "a tab in the indentation: YAML indents with spaces only")
			}
			return nil
		}
		for _, m := range msgs {
			fail(m.Line, "YAML: "+m.Message)
		}
		return nil
	}
	if doc.Root == nil {
		return nil
	}
	if doc.Root.Kind != yaml.MappingNode {
		fail(doc.Root.Line, "not a Kubernetes object: a manifest is a mapping with apiVersion, kind and metadata")
		return nil
	}
	return doc
}

// elisionNear returns the index of a placeholder line at i or just before it (yaml.v3 reports
// some errors on the line after the culprit), or -1.
func elisionNear(lines []string, i int) int {
	for j := i; j >= 0 && j >= i-2; j-- {
		if j < len(lines) && placeholderLine.MatchString(lines[j]) {
			return j
		}
	}
	return -1
}

// tabLines lists the lines whose indentation holds a tab.
func tabLines(lines []string) []int {
	var out []int
	for i, l := range lines {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") {
			out = append(out, i)
		}
	}
	return out
}

// copyNode deep-copies a YAML node tree.
func copyNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = copyNode(child)
	}
	return &c
}

// toObject decodes a mapping node into an unstructured object; it fails when the document has
// no apiVersion or kind.
func toObject(n *yaml.Node) (*unstructured.Unstructured, error) {
	u, err := yamlpath.ToUnstructured(n)
	if err != nil {
		return nil, err
	}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, errors.New("no apiVersion or kind")
	}
	return u, nil
}
