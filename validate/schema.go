package validate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restartbed/restartbed/internal/yamlpath"
)

// Placeholders design documents write where a value belongs.
var (
	// ellipsis stands for any value.
	ellipsis = regexp.MustCompile(`^(\.\.\.|…)$`)
	// letter stands for a number the text names (exit code X, Y, Z).
	letter = regexp.MustCompile(`^[A-Z]$`)
	// angled is a fill-in such as <CHANGE ME>.
	angled = regexp.MustCompile(`^<[^<>]+>$`)
)

// placeholderString is what a string placeholder becomes in the mended document: a valid name,
// image and label value, so that the apiserver judges the rest.
const placeholderString = "placeholder"

// firstLetterCode is the exit code the first letter placeholder becomes; each further letter
// gets the next, so that distinct letters stay distinct (an "In [Y, Z]" list stays valid).
const firstLetterCode = 101

// schemaWalker checks a document against the Go type of its kind and mends Fixed.
type schemaWalker struct {
	doc     *Document
	add     func(Finding)
	letters map[string]int
	// renames maps the path of each wrongly cased key as written to its path as mended.
	renames map[string]string
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	byteSlice       = reflect.TypeFor[[]byte]()
)

// checkSchema walks the document against the type the scheme has for its apiVersion and kind;
// kinds the scheme does not know (other CRDs) are left to the apiserver. It returns the renames
// of wrongly cased keys, for renamePath.
func checkSchema(doc *Document, scheme *runtime.Scheme, letters map[string]int, add func(Finding)) map[string]string {
	apiVersion, kind := yamlpath.Value(doc.Fixed, "apiVersion"), yamlpath.Value(doc.Fixed, "kind")
	if apiVersion == nil || kind == nil {
		keys := mappingKeys(doc.Fixed)
		for _, want := range []string{"apiVersion", "kind"} {
			if yamlpath.Value(doc.Fixed, want) == nil {
				msg := "required: every manifest names its " + want + yamlpath.CaseHint(want, keys)
				add(Finding{File: doc.File, Line: doc.Fixed.Line, Severity: Error, Path: want, Message: msg, Check: CheckParse})
			}
		}
		return nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion.Value)
	if err != nil {
		add(Finding{File: doc.File, Line: apiVersion.Line, Severity: Error, Path: "apiVersion", Message: err.Error(), Check: CheckParse})
		return nil
	}
	obj, err := scheme.New(gv.WithKind(kind.Value))
	if err != nil {
		return nil
	}
	w := &schemaWalker{doc: doc, add: add, letters: letters, renames: map[string]string{}}
	w.walk(doc.Fixed, reflect.TypeOf(obj), "", "")
	return w.renames
}

// renamePath rewrites a path as written into the path as mended, by the longest renamed prefix.
func renamePath(path string, renames map[string]string) string {
	best := ""
	for from := range renames {
		if len(from) > len(best) && (path == from || strings.HasPrefix(path, from+".") || strings.HasPrefix(path, from+"[")) {
			best = from
		}
	}
	if best == "" {
		return path
	}
	return renames[best] + path[len(best):]
}

func mappingKeys(n *yaml.Node) []string {
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

func (w *schemaWalker) report(n *yaml.Node, path, format string, args ...any) {
	w.add(Finding{File: w.doc.File, Line: n.Line, Severity: Error, Path: path, Message: fmt.Sprintf(format, args...), Check: CheckParse})
}

// field is one JSON field of a struct type.
type field struct {
	name string
	typ  reflect.Type
}

// jsonFields lists a struct's JSON fields, inlined structs included.
func jsonFields(t reflect.Type) []field {
	var out []field
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) || name == "" && strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name, f.Type})
	}
	return out
}

// walk checks node against t and returns false when the parent should drop it from Fixed. path
// is the node's path as mended, raw its path as written.
func (w *schemaWalker) walk(n *yaml.Node, t reflect.Type, path, raw string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode || n.Tag == "!!null" {
		return true
	}
	if n.Kind == yaml.ScalarNode && n.Style == 0 && ellipsis.MatchString(n.Value) {
		return w.placeholder(n, t, path)
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || t.Kind() == reflect.Interface || t == byteSlice {
		// Quantity, IntOrString, Time, RawExtension, JSON: their own syntax, the apiserver's to judge.
		if n.Kind == yaml.ScalarNode && (letter.MatchString(n.Value) || angled.MatchString(n.Value)) && n.Style == 0 {
			return w.placeholder(n, t, path)
		}
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.report(n, path, "got %s, want a mapping", describe(n))
			return false
		}
		fields := jsonFields(t)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			p, r := yamlpath.Join(path, key.Value), yamlpath.Join(raw, key.Value)
			j := slices.IndexFunc(fields, func(f field) bool { return f.name == key.Value })
			if j < 0 {
				hint := yamlpath.CaseHint(key.Value, names)
				w.report(key, yamlpath.Join(path, key.Value), "unknown field %q%s", key.Value, hint)
				if hint == "" {
					continue
				}
				// A wrongly cased key most likely meant the field: check its value under that name.
				j = slices.IndexFunc(fields, func(f field) bool { return strings.EqualFold(f.name, key.Value) })
				if yamlpath.Value(n, fields[j].name) != nil {
					continue
				}
				key.Value = fields[j].name
				p = yamlpath.Join(path, key.Value)
				w.renames[r] = p
			}
			if w.walk(value, fields[j].typ, p, r) {
				kept = append(kept, key, value)
			}
		}
		n.Content = kept
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			w.report(n, path, "got %s, want a list", describe(n))
			return false
		}
		kept := n.Content[:0]
		for i, item := range n.Content {
			if w.walk(item, t.Elem(), yamlpath.Index(path, i), yamlpath.Index(raw, i)) {
				kept = append(kept, item)
			}
		}
		n.Content = kept
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.report(n, path, "got %s, want a mapping", describe(n))
			return false
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if w.walk(value, t.Elem(), path+"["+key.Value+"]", raw+"["+key.Value+"]") {
				kept = append(kept, key, value)
			}
		}
		n.Content = kept
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			w.report(n, path, "got %s, want a number", describe(n))
			return false
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			w.report(n, path, "got %s, want true or false", describe(n))
			return false
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.report(n, path, "got %s, want a string", describe(n))
			return false
		}
		if angled.MatchString(n.Value) {
			return w.placeholder(n, t, path)
		}
	default: // the integer kinds
		if !isInteger(t.Kind()) {
			return true
		}
		if n.Kind == yaml.ScalarNode && n.Style == 0 && letter.MatchString(n.Value) {
			return w.placeholder(n, t, path)
		}
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			w.report(n, path, "got %s, want a whole number", describe(n))
			return false
		}
	}
	return true
}

// isInteger reports whether a kind holds whole numbers.
func isInteger(k reflect.Kind) bool {
	return reflect.Int <= k && k <= reflect.Uint64
}

// placeholder reports a placeholder and mends it: a number becomes 1 (a letter, an exit code of
// its own), a string becomes "placeholder", anything else is dropped.
func (w *schemaWalker) placeholder(n *yaml.Node, t reflect.Type, path string) bool {
	w.doc.placeholders = append(w.doc.placeholders, path)
	switch {
	case letter.MatchString(n.Value):
		w.report(n, path, "placeholder %q: the document leaves this number to the reader; write it", n.Value)
	default:
		w.report(n, path, "placeholder %q: the document leaves this value to the reader; write it", n.Value)
	}
	switch {
	case isInteger(t.Kind()):
		value := 1
		if letter.MatchString(n.Value) {
			code, ok := w.letters[n.Value]
			if !ok {
				code = firstLetterCode + len(w.letters)
				w.letters[n.Value] = code
			}
			value = code
		}
		n.Value, n.Tag, n.Style = strconv.Itoa(value), "!!int", 0
		return true
	case t.Kind() == reflect.String:
		n.Value, n.Tag, n.Style = placeholderString, "!!str", 0
		return true
	}
	return false
}

// describe names what a node holds, for "got X, want Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	}
	return strconv.Quote(n.Value)
}
