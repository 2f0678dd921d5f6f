// Package imageglob is the glob language restartbed's rules use to match container images
// (spec.programs[].image, spec.images[].image): * matches any run of characters, slashes
// included ("*agent*" matches registry.k8s.io/jobset/agent:v0.12), ? one character, [abc] and
// [!abc] a class, and a backslash quotes the next character. It matches the whole reference as written.
package imageglob

import (
	"errors"
	"regexp"
	"slices"
	"strings"
)

// Compile turns an image glob into an anchored regular expression.
func Compile(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	runes := []rune(glob)
	for i := 0; i < len(runes); i++ {
		switch r := runes[i]; r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 == len(runes) {
				return nil, errors.New("trailing backslash")
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(runes[i])))
		case '[':
			end := slices.Index(runes[i+1:], ']')
			if end < 0 {
				return nil, errors.New("unterminated character class")
			}
			class := string(runes[i+1 : i+1+end])
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				return nil, errors.New("empty character class")
			}
			b.WriteString("[" + strings.ReplaceAll(class, "\\", "\\\\") + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}
