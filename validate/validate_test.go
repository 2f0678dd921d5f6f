package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// want is a finding a test expects: at a line, of a severity, with a path and words in its message.
type want struct {
	line     int
	severity Severity
	path     string
	words    string
}

func expectFindings(t *testing.T, rep *Report, file string, wants []want) {
	t.Helper()
	for _, w := range wants {
		found := false
		for _, f := range rep.Findings {
			if filepath.Base(f.File) == file && f.Line == w.line && f.Severity == w.severity &&
				strings.HasSuffix(f.Path, w.path) && strings.Contains(f.Message, w.words) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:%d: no %s at %q saying %q", file, w.line, w.severity, w.path, w.words)
		}
	}
	if t.Failed() {
		for _, f := range rep.Findings {
			t.Log(f)
		}
	}
}

func offline(t *testing.T, paths ...string) *Report {
	t.Helper()
	rep, err := Run(context.Background(), paths, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The checks that need no apiserver find every draft-era problem of KEP-467's Story 1 and 2,
// copied verbatim from seed 000, each with what a released cluster expects.
func TestSeedStoriesOffline(t *testing.T) {
	const agent = "initContainers[0]"
	rep := offline(t, "testdata/seed000-story1.yaml", "testdata/seed000-story2.yaml")
	expectFindings(t, rep, "seed000-story1.yaml", []want{
		{10, Error, "spec.failurePolicy.maxRestarts", `placeholder "..."`},
		{14, Error, "spec.replicatedJobs[0].replicas", `placeholder "..."`},
		{26, Error, agent + ".image", `placeholder "..."`},
		{31, Error, agent + ".restartPolicyRules[0].action", "RestartAllContainers"},
		{34, Error, agent + ".restartPolicyRules[0].exitCodes.values[0]", `placeholder "X"`},
		{35, Error, agent + ".restartPolicyRules[1].action", "no Terminate action"},
		{37, Error, agent + ".restartPolicyRules[1].exitCodes.operator", "NotIn"},
		{43, Error, agent + ".startupProbe.httpGet", "/barrier-is-down on 8081"},
		{45, Error, agent + ".startupProbe.failureThreshold", `placeholder "..."`},
		{49, Warning, agent + ".env[0]", "ignores NAMESPACE"},
		{63, Warning, agent + ".env[3]", "reads IN_PLACE_RESTART_EXIT_CODE"},
		{72, Error, "containers[0].restartPolicyRules[0].action", "RestartAllContainers"},
		{23, Warning, "serviceAccountName", "pods: patch"},
	})
	expectFindings(t, rep, "seed000-story2.yaml", []want{
		{8, Error, "Spec", `did you mean "spec"?`},
		{34, Error, "podFailurePolicy.rules[0].onExitCodes.values[0]", `placeholder "Y"`},
		{45, Error, "spec.replicatedJobs[0].template.spec.template.spec." + agent + ".restartPolicyRules[0].action", "RestartAllContainers"},
		{51, Error, agent + ".restartPolicyRules[1].exitCodes.operator", "NotIn"},
		{56, Error, agent + ".startupProbe.httpGet", "/barrier-is-lifted on 8080 is KEP-467's draft"},
		{86, Error, "containers[0].restartPolicyRules[0].action", "no Terminate action"},
		{90, Error, "containers[0].restartPolicyRules[1].action", "RestartAllContainers"},
		{93, Error, "containers[0].restartPolicyRules[1].exitCodes.values[2]", `placeholder "Z"`},
		{94, Error, "", `placeholder "...": the document elides fields here`},
	})
	// The agent's exit code is not judged against rules the document left to the reader.
	for _, f := range rep.Findings {
		if strings.Contains(f.Message, "no RestartAllContainers rule of this container matches") {
			t.Errorf("judged a placeholder: %s", f)
		}
	}
}

// The seed's RBAC protects the draft annotation, which would refuse the released agent's patch.
func TestSeedPolicyProtectsTheDraftAnnotation(t *testing.T) {
	rep := offline(t, "testdata/seed000-rbac.yaml")
	expectFindings(t, rep, "seed000-rbac.yaml", []want{
		{71, Error, "spec.validations[0].expression", "jobset.sigs.k8s.io/in-place-restart-attempt"},
	})
}

func TestCorrectedStoriesAreCleanOffline(t *testing.T) {
	rep := offline(t, "testdata/story1-corrected.yaml", "testdata/story2-corrected.yaml")
	for _, f := range rep.Findings {
		t.Errorf("unexpected: %s", f)
	}
	if rep.Documents != 8 {
		t.Errorf("documents = %d, want 8", rep.Documents)
	}
}

// Each kind of malformed input is one finding at its line, never a panic.
func TestParseProblems(t *testing.T) {
	const js = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: a\n"
	for _, tc := range []struct {
		name, body string
		want       want
	}{
		{"tab", js + "spec:\n\treplicatedJobs: []\n", want{6, Error, "", "a tab in the indentation"}},
		{"syntax", js + "spec: [\n", want{5, Error, "", "YAML:"}},
		{"unknown field", js + "spec:\n  replicatedJob: []\n", want{6, Error, "spec.replicatedJob", `unknown field "replicatedJob"`}},
		{"wrong case", js + "spec:\n  FailurePolicy: {}\n", want{6, Error, "spec.FailurePolicy", `did you mean "failurePolicy"?`}},
		{"wrong kind of value", js + "spec:\n  replicatedJobs: {}\n", want{6, Error, "spec.replicatedJobs", "want a list"}},
		{"number as text", js + "spec:\n  failurePolicy: {maxRestarts: three}\n", want{6, Error, "spec.failurePolicy.maxRestarts", "want a whole number"}},
		{"angled placeholder", js + "spec:\n  replicatedJobs:\n  - name: <CHANGE ME>\n", want{7, Error, "spec.replicatedJobs[0].name", `placeholder "<CHANGE ME>"`}},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", want{1, Error, "kind", "required"}},
		{"not a mapping", "- a\n- b\n", want{1, Error, "", "not a Kubernetes object"}},
		{"onExit", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: i\n    restartPolicy: Never\n    restartPolicyRules:\n    - action: RestartAllContainers\n      onExit:\n        exitCodes: {operator: In, values: [3]}\n",
			want{12, Error, "spec.containers[0].restartPolicyRules[0].onExit", "exitCodes sits directly in the rule"}},
		{"draft condition", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  podFailurePolicy:\n    rules:\n    - action: Ignore\n      onPodConditions:\n      - type: PodRestartInPlace\n",
			want{9, Error, "onPodConditions[0].type", "AllContainersRestarting"}},
		{"old Kueue annotation", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n    kueue.x-k8s.io/safe-to-forcefully-terminate: \"true\"\n",
			want{6, Warning, "metadata.annotations.kueue.x-k8s.io/safe-to-forcefully-terminate", "safe-to-forcefully-delete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(file, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			expectFindings(t, offline(t, file), "m.yaml", []want{tc.want})
		})
	}
}

func TestMissingFile(t *testing.T) {
	rep := offline(t, filepath.Join(t.TempDir(), "absent.yaml"))
	if len(rep.Findings) != 1 || rep.Findings[0].Severity != Error || !strings.Contains(rep.Findings[0].Message, "cannot read") {
		t.Fatalf("findings: %v", rep.Findings)
	}
}

func TestReadinessOfAnInPlaceJobSet(t *testing.T) {
	rep := offline(t, "testdata/readiness.yaml")
	expectFindings(t, rep, "readiness.yaml", []want{
		{29, Error, "initContainers[0].restartPolicyRules", "exits with code 7 (IN_PLACE_RESTART_EXIT_CODE)"},
		{27, Warning, "initContainers[0].startupProbe", "gives up after 30 s"},
		{27, Error, "initContainers[0].startupProbe.httpGet", "answers /ready on 9000 (as STARTUP_PROBE_PATH and STARTUP_PROBE_PORT say)"},
		{33, Error, "initContainers[0].env[1]", "must be the pod's own name"},
		{38, Warning, "containers[0]", "no exit of container worker restarts its pod in place: a failure restarts that container alone"},
		{21, Error, "serviceAccountName", "no patch pods"},
		{50, Error, "replicatedJobs[1].template.spec.template.spec.containers", "no in-place restart agent"},
	})
}

// The agent's permissions are checked as RBAC grants them: wildcards cover, a rule limited to
// resourceNames or to a subresource does not, and an aggregated ClusterRole has the rules of the
// ClusterRoles it selects (as kube-controller-manager fills them in), not its own.
func TestAgentPermissions(t *testing.T) {
	data, err := os.ReadFile("testdata/story1-corrected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The story's JobSet and service account; the RBAC of each case instead of its Role.
	docs := strings.Split(string(data), "\n---\n")
	jobSetAndAccount := docs[0] + "\n---\n" + docs[3]
	const clusterBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agent}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agent}
subjects: [{kind: ServiceAccount, name: jobset-in-place-restart}]
`
	role := func(rules string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: agent}\nrules:\n" + rules
	}
	for _, tc := range []struct {
		name, rbac string
		missing    string // in the Error finding; "" for none
	}{
		{name: "the exact rules", rbac: role(`- {apiGroups: [""], resources: [pods], verbs: [patch]}
- {apiGroups: [jobset.x-k8s.io], resources: [jobsets], verbs: [get, list, watch]}
`)},
		{name: "wildcards", rbac: role(`- {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
`)},
		{name: "resourceNames do not cover every pod", missing: "patch pods", rbac: role(`- {apiGroups: [""], resources: [pods], verbs: [patch], resourceNames: [worker-0]}
- {apiGroups: [jobset.x-k8s.io], resources: [jobsets], verbs: [get, list, watch]}
`)},
		{name: "a subresource is not the resource", missing: "patch pods", rbac: role(`- {apiGroups: [""], resources: [pods/status], verbs: [patch]}
- {apiGroups: [jobset.x-k8s.io], resources: ["*"], verbs: [get, list, watch]}
`)},
		{name: "an aggregated role has the rules it selects", rbac: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {example.com/aggregate-to-agent: "true"}}]
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent-pods, labels: {example.com/aggregate-to-agent: "true"}}
rules: [{apiGroups: [""], resources: [pods], verbs: [patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent-jobsets, labels: {example.com/aggregate-to-agent: "true"}}
rules: [{apiGroups: [jobset.x-k8s.io], resources: [jobsets], verbs: [get, list, watch]}]
`},
		{name: "an aggregated role's own rules are replaced", missing: "get jobsets.jobset.x-k8s.io", rbac: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {example.com/aggregate-to-agent: "true"}}]
rules: [{apiGroups: [jobset.x-k8s.io], resources: [jobsets], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent-pods, labels: {example.com/aggregate-to-agent: "true"}}
rules: [{apiGroups: [""], resources: [pods], verbs: [patch]}]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rbac.yaml")
			if err := os.WriteFile(file, []byte(jobSetAndAccount+"\n---\n"+clusterBinding+"---\n"+tc.rbac), 0o600); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range offline(t, file).Findings {
				if f.Check == CheckReadiness && strings.Contains(f.Message, "grant") {
					got = append(got, f.String())
				}
			}
			switch {
			case tc.missing == "" && len(got) > 0:
				t.Errorf("findings %q, want none", got)
			case tc.missing != "" && (len(got) != 1 || !strings.Contains(got[0], tc.missing)):
				t.Errorf("findings %q, want one naming %q", got, tc.missing)
			}
		})
	}
}
