package validate

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity says whether a finding stops a manifest from working (Error) or is worth knowing
// (Warning).
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Check names the family of checks a finding comes from; docs/validate.md has one section each.
type Check string

const (
	CheckParse     Check = "parse"     // YAML syntax, placeholders, unknown or wrongly cased keys, wrong kinds of value
	CheckDraft     Check = "draft"     // names from the KEP drafts that did not ship
	CheckApiserver Check = "apiserver" // server-side dry-run on the embedded apiserver, webhook included
	CheckReadiness Check = "readiness" // what in-place restart needs of the JobSet, its pods and the agent's RBAC
)

// Finding is one problem in one file.
type Finding struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Severity Severity `json:"severity"`
	// Path is the field path in the document ("spec.replicatedJobs[0].template.spec.backoffLimit"),
	// or "" when the finding concerns the whole document or the file.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	Check   Check  `json:"check"`
}

// String renders the finding as FILE:LINE: SEVERITY: PATH: MESSAGE.
func (f Finding) String() string {
	where := f.File
	if f.Line > 0 {
		where = fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	if f.Path == "" {
		return fmt.Sprintf("%s: %s: %s", where, f.Severity, f.Message)
	}
	return fmt.Sprintf("%s: %s: %s: %s", where, f.Severity, f.Path, f.Message)
}

// sortFindings orders findings by file, line, severity and path, and drops exact repeats (two
// replicated Jobs built from one anchor, say).
func sortFindings(fs []Finding) []Finding {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Severity, b.Severity),
			cmp.Compare(a.Path, b.Path))
	})
	return slices.Compact(fs)
}
