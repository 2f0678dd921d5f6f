package kubeletconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/restartbed/restartbed/timing"
)

// base is a kubelet's configuration as /configz reports it, with a release's gates (1.35 and
// later: KubeletCrashLoopBackOffMax on by default).
func base() *kubeletconfigv1beta1.KubeletConfiguration {
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta:      metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		EnableServer:  ptr.To(true),
		Port:          10250,
		MaxPods:       110,
		FailSwapOn:    ptr.To(true),
		ClusterDNS:    []string{"10.96.0.10"},
		ClusterDomain: "cluster.local",
	}
	Defaults(map[string]bool{GateCrashLoopBackOffMax: true, GateReduceCrashLoopBackOff: false, "RestartAllContainersOnContainerExits": true}).Apply(cfg)
	return cfg
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func load(t *testing.T, content string) (Settings, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet-config")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path, base())
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		// want are the settings' gates that differ from base's, and its period.
		gates  map[string]bool
		period time.Duration
	}{
		{name: "empty: the defaults", content: header, period: 300 * time.Second},
		{name: "a restatement of what the kubelet is", content: header + "port: 10250\nmaxPods: 110\nfailSwapOn: true\nclusterDNS: [10.96.0.10]\n" +
			"featureGates:\n  RestartAllContainersOnContainerExits: true\n", period: 300 * time.Second},
		{name: "zeros of fields the kubelet leaves unset, as a file written back from /configz has them",
			content: header + "enableControllerAttachDetach: false\nkubeAPIQPS: 0\nhealthzBindAddress: \"\"\nevictionHard: {}\ntlsCipherSuites: []\n" +
				"logging:\n  flushFrequency: 0\n  options:\n    json:\n      infoBufferSize: \"0\"\n  verbosity: 0\nshutdownGracePeriod: 0s\n",
			period: 300 * time.Second},
		{name: "a shorter cap", content: header + "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n", period: 30 * time.Second},
		{name: "the reduced backoff", content: header + "featureGates:\n  ReduceDefaultCrashLoopBackOffDecay: true\n",
			gates: map[string]bool{GateReduceCrashLoopBackOff: true}, period: 300 * time.Second},
		{name: "no cap gate", content: header + "featureGates:\n  KubeletCrashLoopBackOffMax: false\n",
			gates: map[string]bool{GateCrashLoopBackOffMax: false}},
		{name: "JSON", content: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","crashLoopBackOff":{"maxContainerRestartPeriod":"1s"}}`,
			period: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load(t, tc.content)
			if err != nil {
				t.Fatal(err)
			}
			want := base().FeatureGates
			for g, v := range tc.gates {
				want[g] = v
			}
			for g, v := range want {
				if got.Gates[g] != v {
					t.Errorf("gate %s = %t, want %t", g, got.Gates[g], v)
				}
			}
			if len(got.Gates) != len(want) {
				t.Errorf("gates %v, want %v", got.Gates, want)
			}
			if got.MaxContainerRestartPeriod != tc.period {
				t.Errorf("maxContainerRestartPeriod = %s, want %s", got.MaxContainerRestartPeriod, tc.period)
			}
		})
	}
}

// TestLoadWrittenBack: the file upstream's node e2e specs write is /configz's configuration,
// changed; everything it restates is accepted.
func TestLoadWrittenBack(t *testing.T) {
	cfg := base()
	cfg.FeatureGates[GateReduceCrashLoopBackOff] = true
	cfg.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: time.Second}
	data, err := sigsyaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := load(t, string(data))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Gates[GateReduceCrashLoopBackOff] || got.MaxContainerRestartPeriod != time.Second {
		t.Errorf("got %+v", got)
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		// want are the messages, each a part of the error.
		want []string
	}{
		{name: "no kind", content: "apiVersion: kubelet.config.k8s.io/v1beta1\n", want: []string{"kubelet-config:1: kind: missing"}},
		{name: "another kind", content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
			want: []string{`kubelet-config:2: kind: "KubeProxyConfiguration": restartbed's kubelets read kind KubeletConfiguration`}},
		{name: "not a mapping", content: "- a\n", want: []string{"must hold one YAML (or JSON) mapping"}},
		{name: "bad YAML", content: header + "maxPods: [\n", want: []string{"kubelet-config:3: did not find expected node content"}},
		{name: "unknown field", content: header + "crashLoopBackoff:\n  maxContainerRestartPeriod: 30s\n",
			want: []string{`kubelet-config:3: crashLoopBackoff: unknown field (keys are case-sensitive: did you mean "crashLoopBackOff"?)`}},
		{name: "unknown nested field", content: header + "crashLoopBackOff:\n  max: 30s\n", want: []string{"kubelet-config:4: crashLoopBackOff.max: unknown field"}},
		{name: "wrong type", content: header + "maxPods: many\n", want: []string{"kubelet-config:3: maxPods:", "want a number"}},
		{name: "a bad duration", content: header + "crashLoopBackOff:\n  maxContainerRestartPeriod: soon\n",
			want: []string{"kubelet-config:4: crashLoopBackOff.maxContainerRestartPeriod:", "want a duration such as 30s"}},
		{name: "a field the kubelet does not take", content: header + "maxPods: 250\n",
			want: []string{"kubelet-config:3: maxPods: 250: restartbed's kubelet does not take this field from a file (it is 110)", "a file may change only crashLoopBackOff.maxContainerRestartPeriod, featureGates.KubeletCrashLoopBackOffMax"}},
		{name: "an explicit false the kubelet is not", content: header + "failSwapOn: false\n", want: []string{"kubelet-config:3: failSwapOn: false: restartbed's kubelet does not take this field from a file (it is true)"}},
		{name: "a cluster gate changed", content: header + "featureGates:\n  RestartAllContainersOnContainerExits: false\n",
			want: []string{"kubelet-config:4: featureGates.RestartAllContainersOnContainerExits: false: restartbed's kubelet does not take this field from a file (it is true)"}},
		{name: "an unknown gate", content: header + "featureGates:\n  NoSuchGate: true\n", want: []string{"kubelet-config:4: featureGates.NoSuchGate: unrecognized feature gate"}},
		{name: "cap out of range", content: header + "crashLoopBackOff:\n  maxContainerRestartPeriod: 10m\n",
			want: []string{"kubelet-config:4: crashLoopBackOff.maxContainerRestartPeriod: 10m0s: must be between 1s and 5m0s"}},
		{name: "cap without its gate", content: header + "featureGates:\n  KubeletCrashLoopBackOffMax: false\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 10s\n",
			want: []string{"kubelet-config:6: crashLoopBackOff.maxContainerRestartPeriod: must not be set while the feature gate KubeletCrashLoopBackOffMax is off"}},
		{name: "every problem at once", content: header + "maxPods: 250\nport: 1\nbogus: 1\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 1h\n",
			want: []string{"kubelet-config:3: maxPods", "kubelet-config:4: port", "kubelet-config:5: bogus: unknown field", "kubelet-config:7: crashLoopBackOff.maxContainerRestartPeriod: 1h0m0s: must be between"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load(t, tc.content)
			if err == nil {
				t.Fatalf("accepted, with %+v", got)
			}
			if !strings.Contains(err.Error(), "kubelet configuration refused: ") || !strings.Contains(err.Error(), "/kubelet-config") {
				t.Errorf("the error does not name the file: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), base()); err == nil || !strings.Contains(err.Error(), "missing: no such file") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	realistic, fast := timing.Realistic(), timing.Fast()
	for _, tc := range []struct {
		name             string
		gates            map[string]bool
		period           time.Duration
		profile          timing.Profile
		initial, maxWant time.Duration
	}{
		{name: "without the cap gate", profile: realistic, initial: 10 * time.Second, maxWant: 5 * time.Minute},
		{name: "reduced, without the cap gate", gates: map[string]bool{GateReduceCrashLoopBackOff: true}, profile: realistic,
			initial: time.Second, maxWant: time.Minute},
		{name: "the default cap", gates: map[string]bool{GateCrashLoopBackOffMax: true}, period: 300 * time.Second, profile: realistic,
			initial: 10 * time.Second, maxWant: 5 * time.Minute},
		// The configured cap wins over the reduced one, as upstream's newCrashLoopBackOff has it.
		{name: "reduced, with the default cap", gates: map[string]bool{GateCrashLoopBackOffMax: true, GateReduceCrashLoopBackOff: true},
			period: 300 * time.Second, profile: realistic, initial: time.Second, maxWant: 5 * time.Minute},
		{name: "a cap below the first delay", gates: map[string]bool{GateCrashLoopBackOffMax: true}, period: 5 * time.Second, profile: realistic,
			initial: 5 * time.Second, maxWant: 5 * time.Second},
		{name: "the fast profile bounds both", gates: map[string]bool{GateCrashLoopBackOffMax: true}, period: 300 * time.Second, profile: fast,
			initial: fast.CrashLoopBackOff, maxWant: fast.CrashLoopBackOffMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			initial, maxDelay := Settings{Gates: tc.gates, MaxContainerRestartPeriod: tc.period}.CrashLoopBackOff(tc.profile)
			if initial != tc.initial || maxDelay != tc.maxWant {
				t.Errorf("got %s up to %s, want %s up to %s", initial, maxDelay, tc.initial, tc.maxWant)
			}
		})
	}
}

// TestCheck: without the kubelet, a file is checked for what is wrong whatever the kubelet.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := Check(write("ok", header+"maxPods: 250\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 30s\nfeatureGates:\n  AnyGate: true\n")); err != nil {
		t.Errorf("values are the kubelet's to judge: %v", err)
	}
	for content, want := range map[string]string{
		header + "bogus: 1\n":   "bad:3: bogus: unknown field",
		header + "maxPods: x\n": "bad:3: maxPods:",
		header + "crashLoopBackOff:\n  maxContainerRestartPeriod: 0s\n": "must be between 1s and 5m0s",
		"kind: KubeletConfiguration\n":                                  "apiVersion: missing",
	} {
		if err := Check(write("bad", content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
}
