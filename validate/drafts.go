package validate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/restartbed/restartbed/internal/yamlpath"
)

// A draftName is a name from the design documents (KEP-467, its design doc, KEP-5532, KEP-6757)
// that shipped under another name or not at all; DESIGN.md, "Names: seeds versus what shipped".
type draftName struct {
	draft    string
	released string // "" when the draft has no released counterpart to substitute
	severity Severity
	message  string
}

// draftTokens are recognised wherever they appear: as keys, as values, inside CEL expressions,
// annotation keys and messages.
var draftTokens = []draftName{
	{"PodRestartInPlace", "AllContainersRestarting", Error,
		"PodRestartInPlace is KEP-5532's draft name of the pod condition; Kubernetes 1.35 sets AllContainersRestarting"},
	{"deprecatedEpoch", "previousInPlaceRestartAttempt", Error,
		"deprecatedEpoch is KEP-467's draft name; JobSet v0.12 reports status.previousInPlaceRestartAttempt"},
	{"syncedEpoch", "currentInPlaceRestartAttempt", Error,
		"syncedEpoch is KEP-467's draft name; JobSet v0.12 reports status.currentInPlaceRestartAttempt"},
	{"jobset.sigs.k8s.io/epoch", "jobset.sigs.k8s.io/in-place-restart-attempt", Error,
		"jobset.sigs.k8s.io/epoch is KEP-467's draft annotation; the released agent writes jobset.sigs.k8s.io/in-place-restart-attempt, so nothing writes this one (and a policy that allows only it refuses the agent's patch)"},
	{"kueue.x-k8s.io/safe-to-forcefully-terminate", "", Warning,
		"Kueue v0.15.0's name: Kueue v0.15.6, v0.16.3 and v0.17 read kueue.x-k8s.io/safe-to-forcefully-delete (restartbed accepts both)"},
	{"KueueForcefullyTerminated", "", Warning,
		"Kueue v0.15.0's condition reason: released Kueue writes KueueForcefullyDeleted"},
}

// tokenPattern matches a draft token that is not part of a longer name.
func tokenPattern(token string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_./-])` + regexp.QuoteMeta(token) + `($|[^A-Za-z0-9_-])`)
}

var draftPatterns = func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(draftTokens))
	for i, d := range draftTokens {
		out[i] = tokenPattern(d.draft)
	}
	return out
}()

// Restart-rule drafts (KEP-5532 and KEP-467's examples).
const (
	draftActionRestartPod = "RestartPod"
	draftActionTerminate  = "Terminate"
	draftOperatorNoIn     = "NoIn"
	draftOnExit           = "onExit"

	noInMessage = "NoIn is a typo in KEP-467's examples: the operator is NotIn"
)

// checkDrafts reports the draft names in a document and mends Fixed: names are released and
// onExit.exitCodes moves up into its rule. A Terminate rule stays until the returned function
// drops it, so that the checks in between report paths with the indexes as written.
func checkDrafts(doc *Document, add func(Finding)) (dropRules func()) {
	report := func(n *yaml.Node, path string, sev Severity, msg string) {
		add(Finding{File: doc.File, Line: n.Line, Severity: sev, Path: path, Message: msg, Check: CheckDraft})
	}
	var drops [][2]*yaml.Node // a rules list and a rule to drop from it
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, value := n.Content[i], n.Content[i+1]
				p := yamlpath.Join(path, key.Value)
				if key.Value == "restartPolicyRules" && value.Kind == yaml.SequenceNode {
					for _, rule := range restartRules(value, p, report) {
						drops = append(drops, [2]*yaml.Node{value, rule})
					}
				}
				if key.Value == "operator" && value.Value == draftOperatorNoIn {
					report(value, p, Error, noInMessage)
					value.Value = "NotIn"
				}
				if key.Kind == yaml.ScalarNode {
					key.Value = draftScalar(key, p, report)
				}
				walk(value, p)
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				walk(item, yamlpath.Index(path, i))
			}
		case yaml.ScalarNode:
			n.Value = draftScalar(n, path, report)
		}
	}
	walk(doc.Fixed, "")
	return func() {
		for _, d := range drops {
			d[0].Content = slices.DeleteFunc(d[0].Content, func(n *yaml.Node) bool { return n == d[1] })
		}
	}
}

// draftScalar reports the draft tokens in a key or value and returns it with released names.
func draftScalar(n *yaml.Node, path string, report func(*yaml.Node, string, Severity, string)) string {
	v := n.Value
	for i, d := range draftTokens {
		if !draftPatterns[i].MatchString(v) {
			continue
		}
		report(n, path, d.severity, d.message)
		if d.released != "" {
			v = strings.ReplaceAll(v, d.draft, d.released)
		}
	}
	return v
}

// restartRules checks a container's restartPolicyRules for the drafts' actions and shape, and
// returns the rules to drop (Terminate has no released counterpart).
func restartRules(rules *yaml.Node, path string, report func(*yaml.Node, string, Severity, string)) (drop []*yaml.Node) {
	for i, rule := range rules.Content {
		p := yamlpath.Index(path, i)
		if rule.Kind != yaml.MappingNode {
			continue
		}
		if onExit := yamlpath.Value(rule, draftOnExit); onExit != nil {
			report(onExit, p+"."+draftOnExit, Error,
				"onExit.exitCodes is KEP-5532's draft shape: in Kubernetes 1.35 exitCodes sits directly in the rule")
			moveUp(rule, draftOnExit, "exitCodes")
		}
		action := yamlpath.Value(rule, "action")
		switch {
		case action == nil:
		case action.Value == draftActionRestartPod:
			report(action, p+".action", Error,
				"RestartPod is KEP-5532's draft name: Kubernetes 1.35 calls the action RestartAllContainers (feature gate RestartAllContainersOnContainerExits)")
			action.Value = "RestartAllContainers"
		case action.Value == draftActionTerminate:
			report(action, p+".action", Error, fmt.Sprintf(
				"there is no %s action (KEP-467's draft): Kubernetes 1.35 has Restart and RestartAllContainers, and an exit no rule matches follows the container's restartPolicy; remove this rule (with restartPolicy Never the container then stays terminated and the pod fails; a sidecar, restartPolicy Always, restarts alone)",
				draftActionTerminate))
			drop = append(drop, rule)
		}
	}
	return drop
}

// moveUp replaces the mapping's key by the value's own field of the given name.
func moveUp(m *yaml.Node, key, field string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		inner := yamlpath.Value(m.Content[i+1], field)
		if inner == nil {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
		m.Content[i].Value = field
		m.Content[i+1] = inner
		return
	}
}
