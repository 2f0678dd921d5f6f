package validate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/restartbed/restartbed/agent"
	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
	"github.com/restartbed/restartbed/fakekubelet/restart"
)

// rules are the restart semantics of a 1.35 kubelet with RestartAllContainers on, the
// configuration in-place restart needs (restartbed's kubelet decides with the same code).
var rules = restart.Rules{RestartAll: true}

// minProbeBudget is the shortest time a barrier probe should wait for its group: every pod of the
// JobSet must be running and have reported its attempt before any barrier lifts.
const minProbeBudget = 60

// agentPermissions are what the agent does with the API (docs/jobset.md, "Agent"): it patches its own pod's
// attempt annotation and watches its JobSet.
var agentPermissions = []struct{ group, resource, verb, why string }{
	{"", "pods", "patch", "to record its restart attempt on its pod"},
	{jobsetv1alpha2.GroupVersion.Group, "jobsets", "get", "to read its JobSet"},
	{jobsetv1alpha2.GroupVersion.Group, "jobsets", "list", "to watch its JobSet"},
	{jobsetv1alpha2.GroupVersion.Group, "jobsets", "watch", "to watch its JobSet"},
}

// readiness checks what in-place restart needs that neither the apiserver nor JobSet's webhook
// checks: an agent in every pod, configured to match its probe and rules, workers whose exits
// restart the pod in place, and the agent's permissions when the files hold RBAC.
type readiness struct {
	add  func(Finding)
	rbac rbacFiles
}

func checkReadiness(docs []*Document, add func(Finding)) {
	r := &readiness{add: add, rbac: collectRBAC(docs)}
	for _, d := range docs {
		if d.Kind() != "JobSet" {
			continue
		}
		var js jobsetv1alpha2.JobSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &js) != nil {
			continue // the apiserver says why
		}
		r.jobSet(d, &js)
	}
}

func (r *readiness) report(d *Document, sev Severity, path, format string, args ...any) {
	r.add(d.finding(sev, CheckReadiness, path, fmt.Sprintf(format, args...)))
}

// jobSet checks every replicated Job's pod template of a JobSet.
func (r *readiness) jobSet(d *Document, js *jobsetv1alpha2.JobSet) {
	inPlace := js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobsetv1alpha2.InPlaceRestart
	namespace := js.Namespace
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		spec := &rj.Template.Spec.Template.Spec
		base := fmt.Sprintf("spec.replicatedJobs[%d].template.spec.template.spec", i)
		agents := findAgents(spec)
		if !inPlace {
			if len(agents) > 0 {
				r.report(d, Warning, agents[0].path(base), "an in-place restart agent, but the JobSet's restartStrategy is not InPlaceRestart: the agent lifts its barrier at once and does nothing")
			}
			continue
		}
		if len(agents) == 0 {
			r.report(d, Error, base+".containers",
				"replicatedJob %s: no in-place restart agent: with restartStrategy InPlaceRestart each pod needs JobSet's agent (an init container with restartPolicy Always, JOBSET_NAME and POD_NAME, and a startup probe) to report its restart attempt; without it the JobSet never syncs and never restarts the group in place",
				rj.Name)
			continue
		}
		if len(agents) > 1 {
			r.report(d, Warning, agents[1].path(base), "a second in-place restart agent in one pod (the first is %s): both report the same pod's attempt", agents[0].c.Name)
		}
		a := agents[0]
		cfg, ok := r.agentConfig(d, js, spec, a, base)
		if ok {
			// Exit codes the document left to the reader are not judged.
			if !d.placeholderUnder(a.path(base)+".restartPolicyRules") && !d.placeholderUnder(a.path(base)+".env") {
				r.agentRules(d, a, cfg, base)
			}
			if cfg.Sidecar() {
				r.barrierProbe(d, a, cfg, base)
			}
		}
		r.workers(d, spec, a, base)
		r.permissions(d, spec, namespace, base)
	}
	if _, ok := js.Annotations[jobsetv1alpha2.DisableInPlaceRestartKey]; ok && inPlace {
		r.report(d, Warning, "metadata.annotations["+jobsetv1alpha2.DisableInPlaceRestartKey+"]",
			"the agents bypass their barriers while this annotation is present: workers start at once and groups never restart in place")
	}
}

// agentRef is an agent container and where it is.
type agentRef struct {
	c     *corev1.Container
	field string // initContainers or containers
	index int
}

func (a agentRef) path(base string) string { return fmt.Sprintf("%s.%s[%d]", base, a.field, a.index) }

// findAgents lists the containers that look like JobSet's agent: named or imaged after it, or
// given its JOBSET_NAME variable.
func findAgents(spec *corev1.PodSpec) []agentRef {
	var out []agentRef
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.cs {
			c := &list.cs[i]
			hasEnv := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == agent.EnvJobSetName })
			if hasEnv || strings.Contains(c.Name, "agent") || strings.Contains(c.Image, "in-place-restart-agent") {
				out = append(out, agentRef{c: c, field: list.field, index: i})
			}
		}
	}
	return out
}

// envIndex is the index of the variable in c.Env, or -1.
func envIndex(c *corev1.Container, name string) int {
	return slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// agentConfig reads the agent's configuration as the released agent would from its environment
// and reports what is wrong with it.
func (r *readiness) agentConfig(d *Document, js *jobsetv1alpha2.JobSet, spec *corev1.PodSpec, a agentRef, base string) (agent.Config, bool) {
	c, path := a.c, a.path(base)
	envPath := func(name string) string {
		if i := envIndex(c, name); i >= 0 {
			return fmt.Sprintf("%s.env[%d]", path, i)
		}
		return path + ".env"
	}
	// Draft names the released agent ignores.
	if envIndex(c, agent.EnvExitCodeDraft) >= 0 {
		r.add(d.finding(Warning, CheckDraft, envPath(agent.EnvExitCodeDraft), fmt.Sprintf(
			"%s is KEP-467's draft name: the released agent reads %s and ignores this one, so it exits with %s's value or %d (restartbed's agent accepts the draft name too)",
			agent.EnvExitCodeDraft, agent.EnvExitCode, agent.EnvExitCode, agent.DefaultExitCode)))
	}
	if envIndex(c, agent.EnvNamespace) >= 0 {
		r.add(d.finding(Warning, CheckDraft, envPath(agent.EnvNamespace), fmt.Sprintf(
			"the released agent ignores %s (KEP-467's draft): it reads its namespace from %s, so the pod must mount its service-account token",
			agent.EnvNamespace, agent.ServiceAccountNSFile)))
	}
	lookup := func(name string) (string, bool) {
		if name == agent.EnvExitCodeDraft || name == agent.EnvNamespace {
			return "", false
		}
		i := envIndex(c, name)
		if i < 0 {
			return "", false
		}
		if e := c.Env[i]; e.ValueFrom != nil {
			return "(from " + valueSource(e.ValueFrom) + ")", true
		}
		return c.Env[i].Value, true
	}
	readFile := func(string) ([]byte, error) {
		if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
			return nil, fmt.Errorf("not mounted")
		}
		return []byte("the pod's namespace"), nil
	}
	cfg, err := agent.ConfigFromEnv(lookup, readFile)
	if cerr := (*agent.ConfigError)(nil); errors.As(err, &cerr) {
		for _, p := range cerr.Problems {
			r.report(d, Error, path+".env", "the agent would exit at start: %s", p)
		}
		return cfg, false
	}
	if i := envIndex(c, agent.EnvPodName); i >= 0 {
		if f := c.Env[i].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
			r.report(d, Error, envPath(agent.EnvPodName), "%s must be the pod's own name: valueFrom.fieldRef.fieldPath: metadata.name (the agent patches the pod it names)", agent.EnvPodName)
		}
	}
	if i := envIndex(c, agent.EnvJobSetName); i >= 0 {
		e := c.Env[i]
		fromJobSetKey := e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && strings.Contains(e.ValueFrom.FieldRef.FieldPath, jobsetv1alpha2.JobSetNameKey)
		if !fromJobSetKey && e.Value != js.Name {
			r.report(d, Warning, envPath(agent.EnvJobSetName), "%s should be the JobSet's name, from the downward API: metadata.annotations['%s']", agent.EnvJobSetName, jobsetv1alpha2.JobSetNameKey)
		}
	}
	switch {
	case a.field == "initContainers" && !restart.IsSidecar(c):
		r.report(d, Error, path+".restartPolicy", "the agent runs until its pod stops, so as an init container it must be a sidecar (restartPolicy: Always); otherwise the workers never start")
		return cfg, false
	case a.field == "containers" && cfg.Sidecar():
		r.report(d, Error, path, "the agent is a regular container without %s: nothing waits for its barrier, so the workers start before the group is in sync; make it an init container with restartPolicy: Always and a startup probe, or run the worker through it with %s",
			agent.EnvWorkerCommand, agent.EnvWorkerCommand)
		return cfg, false
	}
	return cfg, true
}

// valueSource names where a variable's value comes from.
func valueSource(v *corev1.EnvVarSource) string {
	switch {
	case v.FieldRef != nil:
		return v.FieldRef.FieldPath
	case v.ResourceFieldRef != nil:
		return v.ResourceFieldRef.Resource
	case v.ConfigMapKeyRef != nil:
		return "configMap " + v.ConfigMapKeyRef.Name
	case v.SecretKeyRef != nil:
		return "secret " + v.SecretKeyRef.Name
	}
	return "a source"
}

// agentRules checks that the agent's exit for a restart restarts its pod in place.
func (r *readiness) agentRules(d *Document, a agentRef, cfg agent.Config, base string) {
	code := int32(cfg.ExitCode)
	source := fmt.Sprintf("%s's default", "the agent")
	if envIndex(a.c, agent.EnvExitCode) >= 0 {
		source = agent.EnvExitCode
	}
	if rules.RestartsAll(a.c, code) {
		return
	}
	if !cfg.Sidecar() {
		if rule := restart.MatchingRule(a.c, code); rule != nil && rule.Action == corev1.ContainerRestartRuleActionRestart {
			return // main-container mode: restarting the agent alone restarts the worker it runs
		}
	}
	r.report(d, Error, a.path(base)+".restartPolicyRules",
		"the agent exits with code %d (%s) to restart its pod in place, but no RestartAllContainers rule of this container matches %d, so %s; add {action: RestartAllContainers, exitCodes: {operator: In, values: [%d]}} (JobSet's example uses NotIn [0])",
		code, source, code, exitOutcome(a.c, code), code)
}

// exitOutcome says what an exit does instead of restarting all containers.
func exitOutcome(c *corev1.Container, code int32) string {
	if restart.IsSidecar(c) {
		return "the agent alone restarts (a sidecar restarts always) and the group restart stalls"
	}
	if rules.ShouldRestart(c, corev1.RestartPolicyNever, code) {
		return "the container alone restarts and the other containers do not follow"
	}
	return "the container stays terminated"
}

// barrierProbe checks the sidecar's startup probe against where the agent serves its barrier.
func (r *readiness) barrierProbe(d *Document, a agentRef, cfg agent.Config, base string) {
	path := a.path(base) + ".startupProbe"
	want := fmt.Sprintf("httpGet {path: %s, port: %d}", cfg.ProbePath, cfg.ProbePort)
	p := a.c.StartupProbe
	if p == nil {
		r.report(d, Error, a.path(base), "the agent has no startup probe, so its barrier holds nothing: the workers start before the group is in sync; add startupProbe.%s", want)
		return
	}
	if p.HTTPGet == nil {
		r.report(d, Error, path, "the agent's barrier is an HTTP endpoint: the startup probe must be %s", want)
		return
	}
	port := p.HTTPGet.Port.IntValue()
	if p.HTTPGet.Port.StrVal != "" {
		port = 0
		for _, cp := range a.c.Ports {
			if cp.Name == p.HTTPGet.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	if p.HTTPGet.Path != cfg.ProbePath || port != int(cfg.ProbePort) {
		why := "its defaults, as " + agent.EnvStartupProbePath + " and " + agent.EnvStartupProbePort + " are not set"
		if envIndex(a.c, agent.EnvStartupProbePath) >= 0 || envIndex(a.c, agent.EnvStartupProbePort) >= 0 {
			why = "as " + agent.EnvStartupProbePath + " and " + agent.EnvStartupProbePort + " say"
		}
		if p.HTTPGet.Path == "/barrier-is-lifted" {
			why += "; /barrier-is-lifted on 8080 is KEP-467's draft"
		}
		r.report(d, Error, path+".httpGet",
			"the probe asks %s on port %s but the agent answers %s on %d (%s): the probe never succeeds, so the workers never start and the kubelet restarts the agent after the probe's failures; set %s, or set %s and %s to match",
			p.HTTPGet.Path, p.HTTPGet.Port.String(), cfg.ProbePath, cfg.ProbePort, why, want, agent.EnvStartupProbePath, agent.EnvStartupProbePort)
	}
	period, threshold := orDefault(p.PeriodSeconds, 10), orDefault(p.FailureThreshold, 3)
	if period*threshold < minProbeBudget && !d.placeholderUnder(path) {
		r.report(d, Warning, path, "the barrier may stay down until every pod of the JobSet runs, but this probe gives up after %d s (failureThreshold %d × periodSeconds %d) and the agent is restarted; JobSet's example allows 600 s (failureThreshold: 600, periodSeconds: 1)",
			period*threshold, threshold, period)
	}
	if period > 2 {
		r.report(d, Warning, path+".periodSeconds", "the workers start up to %d s after the barrier lifts, at every restart; JobSet's example probes every second", period)
	}
}

// orDefault is a probe setting with the apiserver's default for 0 (unset).
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// workers checks that a failing worker restarts its pod in place.
func (r *readiness) workers(d *Document, spec *corev1.PodSpec, a agentRef, base string) {
	podPolicy := spec.RestartPolicy
	if podPolicy == "" {
		podPolicy = corev1.RestartPolicyOnFailure // JobSet's webhook default
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if a.field == "containers" && a.index == i {
			continue
		}
		path := fmt.Sprintf("%s.containers[%d]", base, i)
		if rules.RestartsAll(c, 0) {
			r.report(d, Warning, path+".restartPolicyRules", "exit code 0 restarts the pod too, so container %s can never complete", c.Name)
		}
		restartsAll := false
		for code := int32(1); code <= 255 && !restartsAll; code++ {
			restartsAll = rules.RestartsAll(c, code)
		}
		if restartsAll {
			continue
		}
		outcome := "fails its pod: the Job replaces it (podReplacementPolicy Failed) and the group re-syncs through the new pod's agent, a recreation rather than an in-place restart"
		if c.RestartPolicy != nil && rules.ShouldRestart(c, podPolicy, 1) || c.RestartPolicy == nil && podPolicy != corev1.RestartPolicyNever {
			outcome = "restarts that container alone, and the other pods of the group do not follow"
		}
		r.report(d, Warning, path, "no exit of container %s restarts its pod in place: a failure %s; add restartPolicy: Never and restartPolicyRules [{action: RestartAllContainers, exitCodes: {operator: NotIn, values: [0]}}] to restart the group in place",
			c.Name, outcome)
	}
}

// rbacFiles are the RBAC objects of the files, by kind.
type rbacFiles struct {
	any             bool
	serviceAccounts map[string]*corev1.ServiceAccount // by namespace/name
	roles           map[string]*rbacv1.Role           // by namespace/name
	clusterRoles    map[string]*rbacv1.ClusterRole
	roleBindings    []*rbacv1.RoleBinding
	clusterBindings []*rbacv1.ClusterRoleBinding
}

func collectRBAC(docs []*Document) rbacFiles {
	f := rbacFiles{serviceAccounts: map[string]*corev1.ServiceAccount{}, roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	for _, d := range docs {
		if d.Object == nil {
			continue
		}
		obj := d.Object.Object
		var err error
		switch d.Kind() {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &sa); err == nil {
				f.serviceAccounts[nsName(sa.Namespace, sa.Name)] = &sa
			}
		case "Role":
			var role rbacv1.Role
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role); err == nil {
				f.roles[nsName(role.Namespace, role.Name)] = &role
			}
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role); err == nil {
				f.clusterRoles[role.Name] = &role
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &b); err == nil {
				f.roleBindings = append(f.roleBindings, &b)
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &b); err == nil {
				f.clusterBindings = append(f.clusterBindings, &b)
			}
		default:
			continue
		}
		f.any = f.any || err == nil
	}
	return f
}

// nsName keys a namespaced object; an object without a namespace goes where the JobSet goes,
// which validate cannot know, so "" stands for "the namespace it is applied to".
func nsName(namespace, name string) string { return namespace + "/" + name }

// sameNamespace reports whether two objects' namespaces are the same, "" being the namespace they
// are applied to.
func sameNamespace(a, b string) bool { return a == b || a == "" || b == "" }

// permissions checks the agent's service account against the RBAC in the files.
func (r *readiness) permissions(d *Document, spec *corev1.PodSpec, namespace, base string) {
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		r.report(d, Error, base+".automountServiceAccountToken", "the agent reads its namespace and credentials from the service-account token; with automountServiceAccountToken false it exits at start")
	}
	if !r.rbac.any {
		r.report(d, Warning, base+".serviceAccountName",
			"the agent runs as service account %q and needs pods: patch and jobsets.jobset.x-k8s.io: get, list, watch in its namespace; no ServiceAccount, Role or binding is among the files to check (config/agent/rbac.yaml has them)", sa)
		return
	}
	var account *corev1.ServiceAccount
	for key, obj := range r.rbac.serviceAccounts {
		if obj.Name == sa && sameNamespace(obj.Namespace, namespace) {
			account = r.rbac.serviceAccounts[key]
		}
	}
	if account == nil && sa != "default" {
		r.report(d, Warning, base+".serviceAccountName", "service account %q is not among the files: it must exist before the pods are created", sa)
	}
	if account != nil && account.AutomountServiceAccountToken != nil && !*account.AutomountServiceAccountToken && spec.AutomountServiceAccountToken == nil {
		r.report(d, Error, base+".serviceAccountName", "service account %q sets automountServiceAccountToken false, so the agent gets no token and exits at start; set automountServiceAccountToken: true in the pod template", sa)
	}
	var granted []rbacv1.PolicyRule
	unknownRoles := map[string]bool{}
	subject := func(s rbacv1.Subject, bindingNS string) bool {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS
		}
		return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && sameNamespace(ns, namespace)
	}
	for _, b := range r.rbac.roleBindings {
		if !sameNamespace(b.Namespace, namespace) || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return subject(s, b.Namespace) }) {
			continue
		}
		granted = append(granted, r.rbac.rulesOf(b.RoleRef, b.Namespace, unknownRoles)...)
	}
	for _, b := range r.rbac.clusterBindings {
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Namespace != "" && subject(s, "") }) {
			granted = append(granted, r.rbac.rulesOf(b.RoleRef, "", unknownRoles)...)
		}
	}
	if len(unknownRoles) > 0 {
		names := slices.Sorted(maps.Keys(unknownRoles))
		r.report(d, Warning, base+".serviceAccountName", "service account %q is bound to %s, which the files do not hold; what it grants is not checked", sa, strings.Join(names, ", "))
	}
	var missing []string
	for _, p := range agentPermissions {
		// Every object of the resource: the agent's pod and JobSet are not known in advance.
		need := rbacv1.PolicyRule{APIGroups: []string{p.group}, Resources: []string{p.resource}, Verbs: []string{p.verb}}
		if covered, _ := rbacvalidation.Covers(granted, []rbacv1.PolicyRule{need}); !covered {
			res := p.resource
			if p.group != "" {
				res += "." + p.group
			}
			missing = append(missing, fmt.Sprintf("%s %s (%s)", p.verb, res, p.why))
		}
	}
	if len(missing) > 0 && len(unknownRoles) == 0 {
		r.report(d, Error, base+".serviceAccountName", "the files grant service account %q no %s: the agent's requests are refused and the group never syncs",
			sa, strings.Join(missing, ", "))
	}
}

// rulesOf resolves a role reference to its rules, noting roles the files do not hold.
func (f rbacFiles) rulesOf(ref rbacv1.RoleRef, bindingNS string, unknown map[string]bool) []rbacv1.PolicyRule {
	switch ref.Kind {
	case "Role":
		for _, role := range f.roles {
			if role.Name == ref.Name && sameNamespace(role.Namespace, bindingNS) {
				return role.Rules
			}
		}
	case "ClusterRole":
		if role, ok := f.clusterRoles[ref.Name]; ok {
			return f.clusterRoleRules(role, unknown)
		}
	}
	unknown[ref.Kind+" "+ref.Name] = true
	return nil
}

// clusterRoleRules are a ClusterRole's rules once kube-controller-manager's clusterrole-
// aggregation controller has filled them in (pkg/controller/clusterroleaggregation): an
// aggregated role has the rules of every other ClusterRole whose labels one of its selectors
// matches, in name order; its own rules are replaced. Only the files' ClusterRoles can be
// selected here; an aggregated role that selects none is noted among the unknown roles, since
// the cluster's own roles may fill it.
func (f rbacFiles) clusterRoleRules(role *rbacv1.ClusterRole, unknown map[string]bool) []rbacv1.PolicyRule {
	if role.AggregationRule == nil {
		return role.Rules
	}
	var selectors []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			continue // the apiserver refuses such a selector: the dry-run reports it
		}
		selectors = append(selectors, sel)
	}
	var rules []rbacv1.PolicyRule
	selected := false
	for _, name := range slices.Sorted(maps.Keys(f.clusterRoles)) {
		other := f.clusterRoles[name]
		if name == role.Name || !slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(other.Labels)) }) {
			continue
		}
		selected = true
		for _, r := range other.Rules {
			if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
				rules = append(rules, r)
			}
		}
	}
	if !selected {
		unknown["the ClusterRoles that aggregate into ClusterRole "+role.Name] = true
	}
	return rules
}
