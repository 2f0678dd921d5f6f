package cli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kwokNodes are Node manifests as KWOK's users write them: the annotation KWOK's controller
// selects by, the taint that keeps other pods off, and the capacity the node declares.
func kwokNodes(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-%d
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-%d}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  capacity: {cpu: "32", memory: 256Gi, pods: "110", google.com/tpu: "4"}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", google.com/tpu: "4"}
`, i, i)
	}
	return b.String()
}

// inPlaceGroup is a JobSet of 8 workers, one per node (each takes a node's 4 TPU chips), with
// JobSet's agent as a sidecar; worker 0 fails once, so the whole group restarts in place.
func inPlaceGroup(name, placement string) string {
	return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
spec:
  failurePolicy: {maxRestarts: 3, restartStrategy: InPlaceRestart}
  replicatedJobs:
  - name: workers
    replicas: 8
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 2147483647
        podReplacementPolicy: Failed
        template:
          spec:
%s
            serviceAccountName: jobset-in-place-restart
            restartPolicy: Never
            terminationGracePeriodSeconds: 0
            volumes: [{name: state, emptyDir: {}}]
            initContainers:
            - name: in-place-restart-agent
              image: registry.k8s.io/jobset/in-place-restart-agent:v0.12.0
              restartPolicy: Always
              restartPolicyRules:
              - action: RestartAllContainers
                exitCodes: {operator: NotIn, values: [0]}
              startupProbe:
                httpGet: {path: /barrier-is-down, port: 8081}
                periodSeconds: 1
                failureThreshold: 600
              env:
              - name: POD_NAME
                valueFrom: {fieldRef: {fieldPath: metadata.name}}
              - name: JOBSET_NAME
                valueFrom: {fieldRef: {fieldPath: "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}}
            containers:
            - name: worker
              image: busybox
              resources: {limits: {google.com/tpu: 4}}
              env:
              - name: INDEX
                valueFrom: {fieldRef: {fieldPath: "metadata.annotations['jobset.sigs.k8s.io/job-index']"}}
              volumeMounts: [{name: state, mountPath: /state}]
              command: [sh, -c, 'echo worker $INDEX on $(hostname);
                if [ "$INDEX" = 0 ] && [ ! -f /state/failed ]; then touch /state/failed; sleep 1; exit 1; fi; sleep 3600']
              restartPolicy: Never
              restartPolicyRules:
              - action: RestartAllContainers
                exitCodes: {operator: NotIn, values: [0]}
`, name, placement)
}

// onlyNodesWrite makes the apiserver refuse pod status writes in the default namespace by
// anyone but a node: the pods run only if their kubelets write as their nodes.
const onlyNodesWrite = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: only-nodes}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods/status]}
  validations:
  - expression: request.userInfo.username.startsWith("system:node:")
    message: only a node writes a pod's status here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: only-nodes}
spec:
  policyName: only-nodes
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
`

// TestKubeletJoinsAClusterItDidNotStart starts `restartbed up --nodes 0` as the cluster that
// "any cluster" stands for here, applies KWOK-style Node manifests, and joins `restartbed
// kubelet` to it, registering 8 nodes and taking over the 8 KWOK ones. A JobSet group on each
// set of nodes restarts in place after one worker fails; kubectl logs, exec and port-forward
// reach the joined nodes' pods through the apiserver's own kubelet client (no egress). SIGTERM
// stops the kubelets and leaves their nodes in the API.
func TestKubeletJoinsAClusterItDidNotStart(t *testing.T) {
	k := kubectl(t)
	bin := buildCLI(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	up := startProcess(t, exec.Command(bin, "up", "--nodes", "0", "--expect-nodes", "16", "--timing", "fast", "--kubeconfig", kubeconfig))
	run, must, eventually := kubectlFuncs(t, k, kubeconfig)
	if got, _ := run("get", "nodes", "-o", "name"); got != "" {
		t.Fatalf("up --nodes 0 has nodes: %q", got)
	}
	apply := exec.Command(k, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(kwokNodes(8))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("applying the KWOK nodes: %v\n%s", err, out)
	}

	// The process runs as the identity config/kubelet gives it, not as the admin, and its nodes'
	// kubelets as the nodes, under up's Node authorizer and NodeRestriction.
	must("apply", "-f", "../../config/kubelet/rbac.yaml", "-f", "../../config/kubelet/node-identities.yaml")
	// Debian's kubectl (1.20) has no "create token": ask the TokenRequest API itself.
	request := exec.Command(k, "--kubeconfig", kubeconfig, "create", "--raw",
		"/api/v1/namespaces/restartbed-system/serviceaccounts/restartbed-kubelet/token", "-f", "-")
	request.Stdin = strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}`)
	raw, err := request.Output()
	if err != nil {
		t.Fatalf("requesting a token of restartbed-kubelet: %v", err)
	}
	var review struct {
		Status struct{ Token string } `json:"status"`
	}
	if err := json.Unmarshal(raw, &review); err != nil || review.Status.Token == "" {
		t.Fatalf("the TokenRequest's answer %s: %v", raw, err)
	}
	token := review.Status.Token
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"restartbed-kubelet": {Token: token}}
	cfg.Contexts[cfg.CurrentContext].AuthInfo = "restartbed-kubelet"
	asKubelet := filepath.Join(filepath.Dir(kubeconfig), "restartbed-kubelet.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, asKubelet); err != nil {
		t.Fatal(err)
	}
	kubelet := startProcess(t, exec.Command(bin, "kubelet", "--kubeconfig", asKubelet, "--timing", "fast",
		"--nodes", "8", "--pool", "reg", "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake", "--node-identities"))
	if out := kubelet.out.String(); !strings.Contains(out, "registered:  reg-0, reg-1, reg-2, ... reg-7 (8 nodes)") ||
		!strings.Contains(out, "taking over: nodes with annotations kwok.x-k8s.io/node=fake") {
		t.Errorf("restartbed kubelet's banner:\n%s", out)
	}
	eventually("16 nodes Ready", func() bool {
		s, _ := run("get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(s, "True") == 16
	})
	// A node taken over keeps what its manifest declares; its addresses and kubelet endpoint
	// are the process's.
	node := must("get", "node", "kwok-node-3", "-o",
		`jsonpath={.status.capacity.cpu} {.spec.taints[0].key} {.status.addresses[?(@.type=="InternalIP")].address} {.status.nodeInfo.kubeletVersion}`)
	if f := strings.Fields(node); len(f) != 4 || f[0] != "32" || f[1] != "kwok.x-k8s.io/node" || f[2] != "127.0.0.1" || !strings.HasPrefix(f[3], "v1.") {
		t.Errorf("kwok-node-3 after the take-over: %q", node)
	}

	policy := exec.Command(k, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	policy.Stdin = strings.NewReader(onlyNodesWrite)
	if out, err := policy.CombinedOutput(); err != nil {
		t.Fatalf("applying the policy: %v\n%s", err, out)
	}
	must("apply", "-f", "../../config/agent/rbac.yaml", "-f", "../../config/agent/policy.yaml")
	groups := map[string]string{
		"on-kwok": `            nodeSelector: {type: kwok}
            tolerations: [{key: kwok.x-k8s.io/node, operator: Exists}]`,
		"on-registered": `            nodeSelector: {restartbed.dev/pool: reg}`,
	}
	for name, placement := range groups {
		apply := exec.Command(k, "--kubeconfig", kubeconfig, "apply", "-f", "-")
		apply.Stdin = strings.NewReader(inPlaceGroup(name, placement))
		if out, err := apply.CombinedOutput(); err != nil {
			t.Fatalf("applying JobSet %s: %v\n%s", name, err, out)
		}
	}
	podsOf := func(name string) []string {
		s, _ := run("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+name, "-o",
			`jsonpath={range .items[*]}{.metadata.uid} {.spec.nodeName} {.status.containerStatuses[0].restartCount} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(lines)
		return lines
	}
	for name := range groups {
		eventually(name+": restarted in place once, every pod Ready", func() bool {
			attempt, _ := run("get", "jobset", name, "-o", "jsonpath={.status.currentInPlaceRestartAttempt}")
			pods := podsOf(name)
			if attempt != "1" || len(pods) != 8 {
				return false
			}
			for _, p := range pods {
				if f := strings.Fields(p); len(f) != 4 || f[2] != "1" || f[3] != "True" {
					return false
				}
			}
			return true
		})
		nodePrefix := map[string]string{"on-kwok": "kwok-node-", "on-registered": "reg-"}[name]
		nodes := map[string]bool{}
		for _, p := range podsOf(name) {
			f := strings.Fields(p)
			if !strings.HasPrefix(f[1], nodePrefix) {
				t.Errorf("%s: pod on node %s, want a %s* node", name, f[1], nodePrefix)
			}
			nodes[f[1]] = true
		}
		if len(nodes) != 8 {
			t.Errorf("%s: pods on %d nodes, want one per node", name, len(nodes))
		}
		// The group restarted in place: no pod was recreated (one Job each, one pod each).
		if jobs := must("get", "jobs", "-l", "jobset.sigs.k8s.io/jobset-name="+name, "-o", `jsonpath={.items[*].status.failed}`); jobs != "" {
			t.Errorf("%s: Jobs counted failed pods %q: a pod was recreated", name, jobs)
		}
	}

	// The kubelet API of a taken-over node, through the apiserver's kubelet client.
	pod := must("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=on-kwok,jobset.sigs.k8s.io/job-index=0", "-o", "jsonpath={.items[0].metadata.name}")
	// RestartAllContainers removed the failed instance, so there is no previous log (as on a node).
	if got := must("logs", pod, "-c", "worker"); got != "worker 0 on on-kwok-workers-0-0" { // JobSet sets the hostname
		t.Errorf("kubectl logs of worker 0 on a KWOK node: %q", got)
	}
	if got := must("exec", pod, "-c", "worker", "--", "sh", "-c", "echo $INDEX; ls /state"); got != "0\nfailed" {
		t.Errorf("kubectl exec on a KWOK node: %q", got)
	}
	// logs -f, exec -it and port-forward on the registered nodes (the talker and the server).
	kubeletAPI(t, k, kubeconfig, run, must, eventually)

	kubelet.interrupt(t, syscall.SIGTERM)
	if got := must("get", "nodes", "-o", "name"); strings.Count(got, "node/") != 16 {
		t.Errorf("after restartbed kubelet stopped, the nodes are %q; want all 16 left as after a power loss", got)
	}
	up.interrupt(t, syscall.SIGINT)
}
