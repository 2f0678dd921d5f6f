package explore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// Point is a moment of the reference run where a fault can land: a state the run passed
// through, as a CEL expression over the observed objects that first holds there.
type Point struct {
	// Index counts the points in the order the reference run reached them, from 0.
	Index int `json:"index"`
	// At is when the reference run reached it, in seconds since its cluster started.
	At float64 `json:"at"`
	// Description says in words what happened.
	Description string `json:"description"`
	// When is the CEL expression (a trigger's when).
	When string `json:"when"`
	// Pod is the pod the point concerns, as a selector of its stable labels, and its containers'
	// roles; empty for a point about a JobSet or a node.
	Pod *PodTarget `json:"pod,omitempty"`
	// Stopped is the container of Pod the point finds waiting or terminated: no fault can make
	// it exit there.
	Stopped string `json:"stopped,omitempty"`
}

// PodTarget names a pod across replays, where its name is generated: the labels its
// controllers give it, and the containers faults act on.
type PodTarget struct {
	Selector string `json:"selector"`
	// Name is the pod's name without its generated suffix, for reports.
	Name string `json:"name"`
	Node string `json:"node,omitempty"`
	// Worker is its first container; Agent its first sidecar (a restartable init container).
	Worker string `json:"worker,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

// traceLine is one line of the runner's trace (scenarios.RunOptions.Trace).
type traceLine struct {
	Time   float64        `json:"time"`
	Type   string         `json:"type"`
	Kind   string         `json:"kind"`
	Name   string         `json:"name"`
	Object map[string]any `json:"object"`
}

// identityLabels are the labels that name a pod's place in its JobSet or Job, in selector order.
var identityLabels = []string{
	jobsetv1alpha2.JobSetNameKey, jobsetv1alpha2.ReplicatedJobNameKey, jobsetv1alpha2.JobIndexKey,
	"batch.kubernetes.io/job-name", "batch.kubernetes.io/job-completion-index",
}

// pointsOf reads a reference run's trace and returns the points it passed, each state once, in
// the order it reached them.
func pointsOf(trace io.Reader) ([]Point, error) {
	var points []Point
	seen := map[string]bool{}
	add := func(at float64, desc, when string, pod *PodTarget) *Point {
		if seen[when] {
			return nil
		}
		seen[when] = true
		points = append(points, Point{Index: len(points), At: at, Description: desc, When: when, Pod: pod})
		return &points[len(points)-1]
	}
	prevPods := map[string]*corev1.Pod{} // by UID
	prevJobSets := map[string]*jobsetv1alpha2.JobSet{}
	prevReady := map[string]string{}
	sc := bufio.NewScanner(trace)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var line traceLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("reading the reference run's trace: %w", err)
		}
		if line.Type == "DELETED" {
			continue
		}
		switch line.Kind {
		case "Pod":
			var pod corev1.Pod
			if runtime.DefaultUnstructuredConverter.FromUnstructured(line.Object, &pod) != nil {
				continue
			}
			target, ident := podTarget(&pod)
			if target == nil {
				continue
			}
			prev := prevPods[string(pod.UID)]
			prevPods[string(pod.UID)] = &pod
			if a, ok := pod.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey]; ok && (prev == nil || prev.Annotations[jobsetv1alpha2.InPlaceRestartAttemptKey] != a) {
				add(line.Time, fmt.Sprintf("pod %s reports attempt %s", target.Name, a),
					fmt.Sprintf("pods.exists(p, %s && p.metadata.?annotations[%q].orValue(\"\") == %q)", ident, jobsetv1alpha2.InPlaceRestartAttemptKey, a), target)
			}
			for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
				for _, st := range statuses(&pod, field) {
					state := stateName(st.State)
					if state == "" || (prev != nil && sameState(statusOf(prev, field, st.Name), st)) {
						continue
					}
					p := add(line.Time, fmt.Sprintf("container %s of pod %s is %s (restart %d)", st.Name, target.Name, state, st.RestartCount),
						fmt.Sprintf("pods.exists(p, %s && p.status.?%s.orValue([]).exists(c, c.name == %q && c.restartCount == %d && has(c.state.%s)))",
							ident, field, st.Name, st.RestartCount, state), target)
					if p != nil && state != "running" {
						p.Stopped = st.Name
					}
				}
			}
		case "JobSet":
			var js jobsetv1alpha2.JobSet
			if runtime.DefaultUnstructuredConverter.FromUnstructured(line.Object, &js) != nil {
				continue
			}
			prev := prevJobSets[js.Name]
			prevJobSets[js.Name] = &js
			for _, f := range []struct {
				field string
				now   *int32
				was   func(*jobsetv1alpha2.JobSet) *int32
			}{
				{"currentInPlaceRestartAttempt", js.Status.CurrentInPlaceRestartAttempt, func(j *jobsetv1alpha2.JobSet) *int32 { return j.Status.CurrentInPlaceRestartAttempt }},
				{"previousInPlaceRestartAttempt", js.Status.PreviousInPlaceRestartAttempt, func(j *jobsetv1alpha2.JobSet) *int32 { return j.Status.PreviousInPlaceRestartAttempt }},
				{"restarts", &js.Status.Restarts, func(j *jobsetv1alpha2.JobSet) *int32 { return &j.Status.Restarts }},
			} {
				if f.now == nil || (prev != nil && f.was(prev) != nil && *f.was(prev) == *f.now) {
					continue
				}
				add(line.Time, fmt.Sprintf("JobSet %s: status.%s is %d", js.Name, f.field, *f.now),
					fmt.Sprintf("jobsets.exists(j, j.metadata.name == %q && j.status.?%s.orValue(-1) == %d)", js.Name, f.field, *f.now), nil)
			}
		case "Node":
			var node corev1.Node
			if runtime.DefaultUnstructuredConverter.FromUnstructured(line.Object, &node) != nil {
				continue
			}
			ready := "Unknown"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = string(c.Status)
				}
			}
			if prevReady[node.Name] == ready {
				continue
			}
			first := prevReady[node.Name] == ""
			prevReady[node.Name] = ready
			if first {
				continue // registration is not a point of the scenario
			}
			add(line.Time, fmt.Sprintf("node %s Ready=%s", node.Name, ready),
				fmt.Sprintf("nodes.exists(n, n.metadata.name == %q && n.status.?conditions.orValue([]).exists(c, c.type == \"Ready\" && c.status == %q))", node.Name, ready), nil)
		}
	}
	return points, sc.Err()
}

// podTarget names the pod by its identity labels; nil for a pod without any (not a Job's).
func podTarget(pod *corev1.Pod) (*PodTarget, string) {
	var sel, cel []string
	for _, key := range identityLabels {
		if v, ok := pod.Labels[key]; ok {
			sel = append(sel, key+"="+v)
			cel = append(cel, fmt.Sprintf("p.metadata.labels[%q] == %q", key, v))
		}
	}
	if len(sel) == 0 {
		return nil, ""
	}
	t := &PodTarget{Selector: strings.Join(sel, ","), Node: pod.Spec.NodeName, Name: pod.GenerateName}
	if job, index := pod.Labels["batch.kubernetes.io/job-name"], pod.Labels["batch.kubernetes.io/job-completion-index"]; job != "" && index != "" {
		t.Name = job + "-" + index // the pod's name without its random suffix
	}
	t.Name = strings.TrimSuffix(t.Name, "-")
	if len(pod.Spec.Containers) > 0 {
		t.Worker = pod.Spec.Containers[0].Name
	}
	for _, ic := range pod.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			t.Agent = ic.Name
			break
		}
	}
	return t, "has(p.metadata.labels) && " + strings.Join(cel, " && ")
}

func statuses(pod *corev1.Pod, field string) []corev1.ContainerStatus {
	if field == "initContainerStatuses" {
		return pod.Status.InitContainerStatuses
	}
	return pod.Status.ContainerStatuses
}

func statusOf(pod *corev1.Pod, field, name string) *corev1.ContainerStatus {
	list := statuses(pod, field)
	if i := slices.IndexFunc(list, func(s corev1.ContainerStatus) bool { return s.Name == name }); i >= 0 {
		return &list[i]
	}
	return nil
}

// stateName is the state's field name in the API: running, terminated or waiting.
func stateName(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return "terminated"
	case s.Waiting != nil:
		return "waiting"
	}
	return ""
}

func sameState(prev *corev1.ContainerStatus, now corev1.ContainerStatus) bool {
	return prev != nil && prev.RestartCount == now.RestartCount && stateName(prev.State) == stateName(now.State)
}

// target is what a fault acts on at a point: the point's pod, or else the first pod of the
// scenario's JobSet (or of the scenario) the reference run had.
func (p Point) target(fallback *PodTarget) *PodTarget {
	if p.Pod == nil {
		return fallback
	}
	if p.Stopped == "" {
		return p.Pod
	}
	t := *p.Pod
	// A container that is not running cannot be made to exit: the exit faults skip the point.
	if t.Worker == p.Stopped {
		t.Worker = ""
	}
	if t.Agent == p.Stopped {
		t.Agent = ""
	}
	return &t
}
