package controller

import (
	"crypto/sha1" //nolint:gosec // upstream's job-key label is a SHA-1; restartbed must write the same value
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// defaultGroupName is the group of a replicated Job that names none (the CRD's default).
const defaultGroupName = "default"

// jobName is a child Job's name: <jobset>-<replicatedJob>-<index>.
func jobName(js *jobsetv1alpha2.JobSet, rj *jobsetv1alpha2.ReplicatedJob, index int32) string {
	return fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, index)
}

// serviceName is the headless Service's name: the network subdomain, else the JobSet's name.
func serviceName(js *jobsetv1alpha2.JobSet) string {
	if js.Spec.Network != nil && js.Spec.Network.Subdomain != "" {
		return js.Spec.Network.Subdomain
	}
	return js.Name
}

// dnsHostnames reports whether the JobSet gets a headless Service and pod subdomains (the
// webhook defaults enableDNSHostnames to true).
func dnsHostnames(js *jobsetv1alpha2.JobSet) bool {
	return js.Spec.Network == nil || js.Spec.Network.EnableDNSHostnames == nil || *js.Spec.Network.EnableDNSHostnames
}

// jobKey is the job-key label: the SHA-1 of <namespace>/<job name>, hex.
func jobKey(namespace, name string) string {
	sum := sha1.Sum([]byte(namespace + "/" + name)) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:])
}

// coordinatorEndpoint is the DNS name of the coordinator pod, "<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>",
// or "" when the JobSet names no coordinator.
func coordinatorEndpoint(js *jobsetv1alpha2.JobSet) string {
	c := js.Spec.Coordinator
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s-%s-%d-%d.%s", js.Name, c.ReplicatedJob, c.JobIndex, c.PodIndex, serviceName(js))
}

// groupName is a replicated Job's group.
func groupName(rj *jobsetv1alpha2.ReplicatedJob) string {
	if rj.GroupName == "" {
		return defaultGroupName
	}
	return rj.GroupName
}

// ChildJobs are the Jobs the controller creates for the JobSet's current restart attempt, with
// the gates given; restartbed validate dry-runs them to find what the apiserver will refuse only
// once the controller creates them.
func ChildJobs(js *jobsetv1alpha2.JobSet, gates FeatureGates) []*batchv1.Job {
	return desiredJobs(js, gates.RestartJob)
}

// desiredJobs constructs every child Job of the JobSet's current restart attempt, in order.
// restartJob is the RestartJob gate: with it, each Job also carries its own restart attempt.
func desiredJobs(js *jobsetv1alpha2.JobSet, restartJob bool) []*batchv1.Job {
	var globalReplicas int32
	groupReplicas := map[string]int32{}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		globalReplicas += rj.Replicas
		groupReplicas[groupName(rj)] += rj.Replicas
	}
	var jobs []*batchv1.Job
	var globalIndex int32
	groupIndex := map[string]int32{}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		group := groupName(rj)
		for index := range rj.Replicas {
			name := jobName(js, rj, index)
			stamp := map[string]string{
				jobsetv1alpha2.JobSetNameKey:         js.Name,
				jobsetv1alpha2.JobSetUIDKey:          string(js.UID),
				jobsetv1alpha2.ReplicatedJobNameKey:  rj.Name,
				jobsetv1alpha2.RestartsKey:           strconv.Itoa(int(js.Status.Restarts)),
				jobsetv1alpha2.ReplicatedJobReplicas: strconv.Itoa(int(rj.Replicas)),
				jobsetv1alpha2.GlobalReplicasKey:     strconv.Itoa(int(globalReplicas)),
				jobsetv1alpha2.JobIndexKey:           strconv.Itoa(int(index)),
				jobsetv1alpha2.JobKey:                jobKey(js.Namespace, name),
				jobsetv1alpha2.JobGlobalIndexKey:     strconv.Itoa(int(globalIndex)),
				jobsetv1alpha2.GroupNameKey:          group,
				jobsetv1alpha2.GroupReplicasKey:      strconv.Itoa(int(groupReplicas[group])),
				jobsetv1alpha2.JobGroupIndexKey:      strconv.Itoa(int(groupIndex[group])),
			}
			if endpoint := coordinatorEndpoint(js); endpoint != "" {
				stamp[jobsetv1alpha2.CoordinatorKey] = endpoint
			}
			if restartJob {
				stamp[jobsetv1alpha2.JobRestartsKey] = strconv.Itoa(int(jobRestarts(js, rj.Name, index)))
			}
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: js.Namespace,
					Labels: maps.Clone(rj.Template.Labels), Annotations: maps.Clone(rj.Template.Annotations)},
				Spec: *rj.Template.Spec.DeepCopy(),
			}
			for _, meta := range []*metav1.ObjectMeta{&job.ObjectMeta, &job.Spec.Template.ObjectMeta} {
				if meta.Labels == nil {
					meta.Labels = map[string]string{}
				}
				if meta.Annotations == nil {
					meta.Annotations = map[string]string{}
				}
				maps.Copy(meta.Labels, stamp)
				maps.Copy(meta.Annotations, stamp)
				maps.Copy(meta.Annotations, exclusivePlacement(js, rj))
			}
			job.Spec.Suspend = ptr.To(ptr.Deref(js.Spec.Suspend, false))
			if dnsHostnames(js) {
				job.Spec.Template.Spec.Subdomain = serviceName(js)
			}
			if placeByNodeSelector(job) {
				pod := &job.Spec.Template.Spec
				if pod.NodeSelector == nil {
					pod.NodeSelector = map[string]string{}
				}
				pod.NodeSelector[jobsetv1alpha2.NamespacedJobKey] = js.Namespace + "_" + name
				pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: jobsetv1alpha2.NoScheduleTaintKey,
					Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
			}
			addClaimVolumes(js, &job.Spec.Template.Spec)
			job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}
			jobs = append(jobs, job)
			globalIndex++
			groupIndex[group]++
		}
	}
	return jobs
}

// exclusivePlacement returns the exclusive-placement annotations a replicated Job's Jobs and pods
// carry: the JobSet's, replaced by the replicated Job template's when that sets its own topology.
func exclusivePlacement(js *jobsetv1alpha2.JobSet, rj *jobsetv1alpha2.ReplicatedJob) map[string]string {
	out := map[string]string{}
	for _, from := range []map[string]string{js.Annotations, rj.Template.Annotations} {
		topology, ok := from[jobsetv1alpha2.ExclusiveKey]
		if !ok {
			continue
		}
		out[jobsetv1alpha2.ExclusiveKey] = topology
		if strategy, ok := from[jobsetv1alpha2.NodeSelectorStrategyKey]; ok {
			out[jobsetv1alpha2.NodeSelectorStrategyKey] = strategy
		}
	}
	return out
}

// placeByNodeSelector reports whether a Job uses the nodeSelector strategy of exclusive
// placement: its pods then select nodes labelled with the namespaced Job name and tolerate the
// no-schedule taint; labelling and tainting the nodes is the user's part. (The other strategy,
// leader affinity injected by upstream's pod webhook, is not modelled.)
func placeByNodeSelector(job *batchv1.Job) bool {
	_, exclusive := job.Annotations[jobsetv1alpha2.ExclusiveKey]
	_, bySelector := job.Annotations[jobsetv1alpha2.NodeSelectorStrategyKey]
	return exclusive && bySelector
}

// claimName is the name of the PVC made from a volume claim policy's template: <template>-<jobset>.
func claimName(js *jobsetv1alpha2.JobSet, template string) string {
	return template + "-" + js.Name
}

// addClaimVolumes adds a volume for each volume-claim-policy template that a container of the
// pod mounts by the template's name.
func addClaimVolumes(js *jobsetv1alpha2.JobSet, pod *corev1.PodSpec) {
	mounted := func(name string) bool {
		for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
			for i := range cs {
				if slices.ContainsFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name }) {
					return true
				}
			}
		}
		return false
	}
	for _, policy := range js.Spec.VolumeClaimPolicies {
		for _, t := range policy.Templates {
			if !mounted(t.Name) {
				continue
			}
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(js, t.Name)}}})
		}
	}
}

// jobRestarts is the restart attempt of one Job under the per-Job actions.
func jobRestarts(js *jobsetv1alpha2.JobSet, replicatedJob string, index int32) int32 {
	if st := findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, replicatedJob); st != nil && int(index) < len(st.JobRestarts) {
		return st.JobRestarts[index]
	}
	return 0
}

// childJobs are a JobSet's Jobs by generation and state.
type childJobs struct {
	previous, active, successful, failed []*batchv1.Job
	// suspended are the active Jobs that are suspended, by replicated Job.
	suspended map[string][]*batchv1.Job
	// counts are the current Jobs' counts by replicated Job, as the JobSet's status has them.
	counts map[string]*jobCounts
}

type jobCounts struct{ succeeded, failed, active, suspended, ready int32 }

// classify sorts Jobs and counts the current ones: a Job of an earlier restart attempt is
// previous (with the RestartJob gate, also one of an earlier attempt of its own); otherwise its
// Complete or Failed condition decides, and anything else is active. It reads only what
// newChildJob took from each Job: a reconcile at 5000 pods goes through 1250 Jobs, and reading
// their labels and conditions there was most of its time.
func classify(js *jobsetv1alpha2.JobSet, jobs []*childJob, restartJob bool) childJobs {
	c := childJobs{counts: map[string]*jobCounts{}, suspended: map[string][]*batchv1.Job{}}
	count := func(job *childJob) *jobCounts {
		n := c.counts[job.replicatedJob]
		if n == nil {
			n = &jobCounts{}
			c.counts[job.replicatedJob] = n
		}
		return n
	}
	for _, job := range jobs {
		switch {
		case outdated(js, job, restartJob):
			c.previous = append(c.previous, job.Job)
		case job.finished == batchv1.JobComplete:
			c.successful = append(c.successful, job.Job)
			count(job).succeeded++
		case job.finished == batchv1.JobFailed:
			c.failed = append(c.failed, job.Job)
			count(job).failed++
		default:
			c.active = append(c.active, job.Job)
			n := count(job)
			if job.running {
				n.active++
			}
			if job.suspended {
				n.suspended++
				c.suspended[job.replicatedJob] = append(c.suspended[job.replicatedJob], job.Job)
			}
			if job.ready {
				n.ready++
			}
		}
	}
	return c
}

// outdated reports whether a Job belongs to an earlier restart attempt of the JobSet or, with
// the RestartJob gate, of its own index. A Job whose attempt labels cannot be read is outdated.
func outdated(js *jobsetv1alpha2.JobSet, job *childJob, restartJob bool) bool {
	if job.restarts < 0 || int32(job.restarts) < js.Status.Restarts {
		return true
	}
	if !restartJob {
		return false
	}
	if job.index < 0 || job.ownRestarts < 0 {
		return true
	}
	return int32(job.ownRestarts) < jobRestarts(js, job.replicatedJob, int32(job.index))
}

// jobCondition returns the Job's condition of type t if it is True, else nil.
func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// replicatedJobsStatus counts the current Jobs of each replicated Job.
func replicatedJobsStatus(js *jobsetv1alpha2.JobSet, c childJobs) []jobsetv1alpha2.ReplicatedJobStatus {
	out := make([]jobsetv1alpha2.ReplicatedJobStatus, len(js.Spec.ReplicatedJobs))
	for i, rj := range js.Spec.ReplicatedJobs {
		out[i].Name = rj.Name
		if n := c.counts[rj.Name]; n != nil {
			out[i].Succeeded, out[i].Failed, out[i].Active, out[i].Suspended, out[i].Ready = n.succeeded, n.failed, n.active,
				n.suspended, n.ready
		}
		if old := findReplicatedJobStatus(js.Status.ReplicatedJobsStatus, rj.Name); old != nil {
			out[i].JobRestarts, out[i].JobRestartsCountTowardsMax = old.JobRestarts, old.JobRestartsCountTowardsMax
		}
	}
	return out
}

func findReplicatedJobStatus(list []jobsetv1alpha2.ReplicatedJobStatus, name string) *jobsetv1alpha2.ReplicatedJobStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
