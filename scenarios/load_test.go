package scenarios

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// valid is SCENARIOS.md's example, with its manifest file beside it.
const valid = `apiVersion: restartbed.dev/v1alpha1
kind: Scenario
metadata:
  name: worker-crash-group-restart
spec:
  description: free text, shown in reports
  namespace: default
  timing: fast
  featureGates:
    RestartAllContainersOnContainerExits: true
  nodes:
  - name: pool-a
    count: 2
    labels: {cloud.google.com/gke-nodepool: pool-a}
    capacity: {cpu: "8", memory: 32Gi, pods: "110", google.com/tpu: "4"}
    taints: []
  controllers:
    kueueFailureRecovery:
      enabled: false
      threshold: 60s
  programs:
  - container: in-place-restart-agent
    image: "*agent*"
    builtin: agent
  - container: worker
    run: |
      sleep 3600
  objects:
  - file: manifests/jobset.yaml
  - inline:
      apiVersion: v1
      kind: ServiceAccount
      metadata: {name: agent}
  steps:
  - name: all pods running
    waitFor: 'pods.size() == 4 && pods.all(p, p.status.phase == "Running")'
    timeout: 60s
  - capture:
      uids: 'pods.map(p, p.metadata.uid)'
  - exitContainer: {pod: {selector: "jobset.sigs.k8s.io/job-index=0", index: 0}, container: worker, exitCode: 3}
  - waitFor: 'jobsets[0].status.currentInPlaceRestartAttempt == 1'
    timeout: 30s
  - expect: 'pods.map(p, p.metadata.uid) == captured.uids'
`

const manifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: one}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two}
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTheContractsExample(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/jobset.yaml", manifest)
	sc, err := Load(write(t, dir, "s.yaml", valid))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Objects) != 3 || sc.Objects[1].GetName() != "two" || sc.Objects[2].GetKind() != "ServiceAccount" {
		t.Errorf("objects: %v", sc.Objects)
	}
	if !strings.HasSuffix(sc.Objects[1].Origin(), "jobset.yaml:5") {
		t.Errorf("origin of the second document: %s", sc.Objects[1].Origin())
	}
	if len(sc.Pools) != 1 || sc.Pools[0].Count != 2 || sc.Pools[0].Capacity.Name("google.com/tpu", "").String() != "4" {
		t.Errorf("pools: %+v", sc.Pools)
	}
	if s := sc.Spec.Steps[2]; s.Line != 40 || s.ExitContainer.Pod.Selector == "" || *s.ExitContainer.ExitCode != 3 {
		t.Errorf("step 2: line %d %+v", s.Line, s.ExitContainer)
	}
	// An expression knows where the file has it, for the errors of its evaluations.
	c, ok := sc.Spec.Steps[1].action.(captureStep)
	if want := filepath.Join(dir, "s.yaml") + ":39 (spec.steps[1].capture.uids)"; !ok || len(c.exprs) != 1 || c.exprs[0].at != want {
		t.Errorf("step 1: %#v, want a capture at %s", sc.Spec.Steps[1].action, want)
	}
}

func TestMalformedScenarios(t *testing.T) {
	for _, tc := range []struct {
		name, edit, want string
	}{
		{"unknown field", "  description: free text, shown in reports\n  descripton: typo\n", "s.yaml:7: spec.descripton: unknown field; spec takes description, "},
		{"wrong case", "spec:\n  Namespace: x\n", "s.yaml:6: spec.Namespace: unknown field (keys are case-sensitive: did you mean \"namespace\"?)"},
		{"unknown field in a step", "  - expect: 'pods.map(p, p.metadata.uid) == captured.uids'\n    timout: 5s\n", "s.yaml:44: spec.steps[4].timout: unknown field"},
		{"bad CEL", "    waitFor: 'jobsets[0].status.currentInPlaceRestartAttempt == 1'\n", "s.yaml:41: spec.steps[3].waitFor: CEL does not compile"},
		{"CEL that is not a boolean", "  - expect: 'pods.map(p, p.metadata.uid) == captured.uids'\n", "s.yaml:43: spec.steps[4].expect: CEL must be a boolean"},
		{"missing file", "  - file: manifests/jobset.yaml\n", "s.yaml:29: spec.objects[0].file: cannot read "},
		{"bad duration", "    timeout: 60s\n", "s.yaml:37: spec.steps[0].timeout: bad duration \"sixty\""},
		{"two actions in a step", "  - expect: 'pods.map(p, p.metadata.uid) == captured.uids'\n", "s.yaml:43: spec.steps[4]: 2 actions (expect, sleep): a step takes exactly one"},
		{"bad pod reference", "  - exitContainer: {pod: {selector: \"jobset.sigs.k8s.io/job-index=0\", index: 0}, container: worker, exitCode: 3}\n", "s.yaml:40: spec.steps[2].exitContainer.pod: give name, or selector (and index), not both"},
		{"tab", "  timing: fast\n", "s.yaml:7: found a tab character that violates indentation (a tab? YAML indents with spaces only)"},
		{"delete by pod and by name", "", "s.yaml:44: spec.steps[5].delete: pod names the pod to delete: give it instead of kind and name, not with them"},
		{"delete by a bad pod reference", "", "s.yaml:44: spec.steps[5].delete.pod.selector: bad label selector"},
		{"zero Kueue threshold", "      threshold: 0s\n", "s.yaml:20: spec.controllers.kueueFailureRecovery.threshold: must be positive, got 0s"},
		{"unknown node", "  - expect: 'pods.map(p, p.metadata.uid) == captured.uids'\n", "s.yaml:44: spec.steps[5].failNode.node: no node \"gpu-0\" in this scenario; its nodes are pool-a-0, pool-a-1"},
		{"a shard step without kubelet processes", "", "s.yaml:44: spec.steps[5].killShard: a shard step needs the nodes in kubelet processes: set spec.kubelets.processes"},
		{"an unknown shard", "", "s.yaml:45: spec.steps[5].failShard.shard: no kubelet process \"kubelet-2\" in this scenario; they are kubelet-0, kubelet-1"},
		{"a shard step with two targets", "", "s.yaml:45: spec.steps[5].recoverShard: give exactly one of shard, node and nodeOf"},
		{"a shard step on an unknown node", "", "s.yaml:45: spec.steps[5].killShard.node: no node \"gpu-0\" in this scenario"},
		{"no kubelet processes", "", "s.yaml:17: spec.kubelets.processes: must be at least 1, got 0"},
		{"an unknown component", "", "s.yaml:45: spec.steps[5].killComponent.component: component \"apiserver\": give one of etcd, kube-apiserver, kube-controller-manager, kube-scheduler"},
		{"a component step without its component", "", "s.yaml:44: spec.steps[5].startComponent: component \"\": give one of etcd, "},
		{"an unknown builtin", "  invariants:\n  - builtin: jobset\n", "s.yaml:45: spec.invariants[0].builtin: unknown built-in invariants \"jobset\": the one set is jobset-in-place"},
		{"an invariant without always", "  invariants:\n  - name: x\n", "s.yaml:45: spec.invariants[0]: an invariant needs a name and an always expression"},
		{"an invariant that is not a boolean", "  invariants:\n  - name: x\n    always: pods.size()\n", "s.yaml:46: spec.invariants[0].always: CEL must be a boolean"},
		{"an invariant given twice", "  invariants:\n  - builtin: jobset-in-place\n  - builtin: jobset-in-place\n", "s.yaml:46: spec.invariants[1]: invariant \"jobset-in-place\" is given twice"},
		{"a recovery bound on a CEL invariant", "  invariants:\n  - name: x\n    always: 'true'\n    recoverWithin: 1m\n", "s.yaml:47: spec.invariants[0].recoverWithin: only the built-in set (builtin: jobset-in-place) has a recovery bound"},
		{"a trigger that waits", "  triggers:\n  - name: t\n    when: 'true'\n    steps:\n    - waitFor: 'true'\n", "s.yaml:48: spec.triggers[0].steps[0].waitFor: a trigger's steps cannot waitFor"},
		{"a trigger without when", "  triggers:\n  - name: t\n    steps:\n    - sleep: 1s\n", "s.yaml:45: spec.triggers[0].when: required"},
		{"a trigger step on an unknown node", "  triggers:\n  - name: t\n    when: 'true'\n    steps:\n    - failNode: {node: gpu-0}\n", "s.yaml:48: spec.triggers[0].steps[0].failNode.node: no node \"gpu-0\""},
		{"an unknown field in a trigger", "  triggers:\n  - name: t\n    wen: 'true'\n", "s.yaml:46: spec.triggers[0].wen: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			content := valid
			switch tc.name {
			case "missing file":
			case "wrong case":
				content = strings.Replace(valid, "spec:\n  description", "spec:\n  Namespace: x\n  description", 1)
			case "bad CEL":
				content = strings.Replace(valid, "currentInPlaceRestartAttempt == 1'", "currentInPlaceRestartAttempt == '", 1)
			case "CEL that is not a boolean":
				content = strings.Replace(valid, "== captured.uids'", "'", 1)
			case "bad duration":
				content = strings.Replace(valid, "timeout: 60s", "timeout: sixty", 1)
			case "two actions in a step":
				content = valid + "    sleep: 1s\n"
			case "bad pod reference":
				content = strings.Replace(valid, `{selector: "jobset.sigs.k8s.io/job-index=0", index: 0}`, `{name: p, selector: "a=b"}`, 1)
			case "tab":
				content = strings.Replace(valid, "  timing: fast", "\ttiming: fast", 1)
			case "unknown node":
				content = valid + "  - failNode: {node: gpu-0}\n"
			case "a shard step without kubelet processes":
				content = valid + "  - killShard: {shard: kubelet-0}\n"
			case "an unknown shard":
				content = strings.Replace(valid, "  controllers:\n", "  kubelets: {processes: 2}\n  controllers:\n", 1) + "  - failShard: {shard: kubelet-2}\n"
			case "a shard step with two targets":
				content = strings.Replace(valid, "  controllers:\n", "  kubelets: {processes: 2}\n  controllers:\n", 1) + "  - recoverShard: {shard: kubelet-0, node: pool-a-0}\n"
			case "a shard step on an unknown node":
				content = strings.Replace(valid, "  controllers:\n", "  kubelets: {processes: 2, takeover: true}\n  controllers:\n", 1) + "  - killShard: {node: gpu-0}\n"
			case "no kubelet processes":
				content = strings.Replace(valid, "  controllers:\n", "  kubelets: {takeover: true}\n  controllers:\n", 1)
			case "zero Kueue threshold":
				content = strings.Replace(valid, "      threshold: 60s\n", tc.edit, 1)
			case "an unknown component":
				content = valid + "  - killComponent:\n      component: apiserver\n"
			case "a component step without its component":
				content = valid + "  - startComponent: {}\n"
			case "an unknown builtin", "an invariant without always", "a recovery bound on a CEL invariant", "an invariant that is not a boolean", "an invariant given twice",
				"a trigger that waits", "a trigger without when", "a trigger step on an unknown node", "an unknown field in a trigger":
				content = valid + tc.edit
			case "delete by pod and by name":
				content = valid + "  - delete: {kind: Pod, name: a, pod: {name: a}}\n"
			case "delete by a bad pod reference":
				content = valid + "  - delete: {pod: {selector: 'a in (b'}}\n"
			default:
				content = strings.Replace(valid, strings.SplitN(tc.edit, "\n", 2)[0]+"\n", tc.edit, 1)
			}
			if tc.name != "missing file" {
				write(t, dir, "manifests/jobset.yaml", manifest)
			}
			_, err := Load(write(t, dir, "s.yaml", content))
			var invalid *InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("want an *InvalidError, got %v", err)
			}
			got := strings.ReplaceAll(err.Error(), dir+"/", "")
			if !strings.Contains(got, tc.want) {
				t.Errorf("got:\n%s\nwant it to contain:\n%s", got, tc.want)
			}
		})
	}
}

// Every action field of Step is one kind of step, and each kind sees its own field only: a field
// without its entry in stepKinds would be accepted in a file and never run.
func TestEveryStepFieldIsOneKind(t *testing.T) {
	kinds := map[string]stepKind{}
	for _, k := range stepKinds {
		kinds[k.key] = k
	}
	for f := range reflect.TypeFor[Step]().Fields() {
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" || tag == "name" || tag == "timeout" {
			continue
		}
		if _, ok := kinds[tag]; !ok {
			t.Errorf("Step.%s (%s) is no kind of step: add it to stepKinds", f.Name, tag)
			continue
		}
		delete(kinds, tag)
		var s Step
		field := reflect.ValueOf(&s).Elem().FieldByIndex(f.Index)
		switch field.Kind() {
		case reflect.Pointer:
			field.Set(reflect.New(field.Type().Elem()))
		case reflect.Map:
			field.Set(reflect.MakeMap(field.Type()))
		case reflect.Slice:
			field.Set(reflect.MakeSlice(field.Type(), 0, 0))
		}
		for _, k := range stepKinds {
			if got, want := k.set(&s), k.key == tag; got != want {
				t.Errorf("with only %s set, kind %s reports set = %t", tag, k.key, got)
			}
		}
	}
	for key := range kinds {
		t.Errorf("stepKinds has %s, which no field of Step decodes", key)
	}
}

// A program may name a host binary, relative to the scenario file; Run refuses it unless the
// run allows host binaries, before a cluster starts.
func TestHostBinaryPrograms(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/jobset.yaml", manifest)
	agent := write(t, dir, "bin/agent", "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	content := strings.Replace(valid, "    builtin: agent\n", "    binary: bin/agent\n", 1)
	sc, err := Load(write(t, dir, "s.yaml", content))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := sc.ClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.Programs[0].Binary; got != agent {
		t.Errorf("the rule's binary is %q, want %q", got, agent)
	}
	problems := sc.HostBinaryProblems()
	if len(problems) != 1 || problems[0].Line != 24 || problems[0].Path != "spec.programs[0].binary" {
		t.Fatalf("problems %+v, want one at line 24", problems)
	}
	res := Run(context.Background(), sc, RunOptions{})
	var invalid *InvalidError
	if !errors.As(res.Err, &invalid) || res.Passed() || len(res.Steps) != len(sc.Spec.Steps) {
		t.Errorf("Run without AllowHostBinaries: %v, steps %d", res.Err, len(res.Steps))
	}

	if err := os.Chmod(agent, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(filepath.Join(dir, "s.yaml"))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:24: spec.programs[0].binary: "+agent+" is not an executable file") {
		t.Errorf("a binary that is not executable: %v", err)
	}
}

// spec.images: each entry becomes a rule of the image model; every bad entry is reported at its
// field's line, all at once. spec.imageCommands turns the images' own commands on.
func TestImages(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/jobset.yaml", manifest)
	images := `  images:
  - image: "not-exist-image:*"
    missing: true
  - image: "registry.example/team/*"
    failPulls: 2
    pullTime: 90s
    size: 40Gi
  imageCommands: true
  objects:
`
	sc, err := Load(write(t, dir, "s.yaml", strings.Replace(valid, "  objects:\n", images, 1)))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := sc.ClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Images) != 2 || !opts.Images[0].Missing || opts.Images[1].FailPulls != 2 || *opts.Images[1].PullTime != 90*time.Second ||
		opts.Images[1].SizeBytes != 40<<30 || !opts.ImageCommands {
		t.Errorf("image rules %+v", opts.Images)
	}

	bad := `  images:
  - image: "[a"
    missing: true
    unreachable: true
  - failPulls: -1
    size: lots
  objects:
`
	_, err = Load(write(t, dir, "s.yaml", strings.Replace(valid, "  objects:\n", bad, 1)))
	var invalid *InvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("want an *InvalidError, got %v", err)
	}
	got := strings.ReplaceAll(err.Error(), dir+"/", "")
	for _, want := range []string{
		`s.yaml:29: spec.images[0].image: bad glob "[a": unterminated character class`,
		"s.yaml:31: spec.images[0].unreachable: an image is missing or its registry unreachable, not both",
		"s.yaml:32: spec.images[1].image: required",
		"s.yaml:32: spec.images[1].failPulls: must not be negative, got -1",
		`s.yaml:33: spec.images[1].size: bad quantity "lots"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got:\n%s\nwant it to contain:\n%s", got, want)
		}
	}
}

// A scenario whose nodes run in kubelet processes needs the command to run them with, and the
// real clock; without them it fails before any cluster starts, saying what is missing.
func TestKubeletProcessesNeedTheirCommand(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/jobset.yaml", manifest)
	sc, err := Load(write(t, dir, "s.yaml", strings.Replace(valid, "  controllers:\n", "  kubelets: {processes: 2}\n  controllers:\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts RunOptions
		want string
	}{
		{RunOptions{}, "RunOptions.KubeletCommand"},
		{RunOptions{KubeletCommand: []string{"restartbed"}, Clock: clocktesting.NewFakeClock(time.Now())}, "the real clock"},
	} {
		res := Run(context.Background(), sc, tc.opts)
		if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
			t.Errorf("Run with %+v: %v, want an error that says %q", tc.opts, res.Err, tc.want)
		}
		if len(res.Steps) != len(sc.Spec.Steps) || res.Steps[0].Status != Skipped {
			t.Errorf("Run with %+v: steps %+v, want all skipped", tc.opts, res.Steps)
		}
	}
}
