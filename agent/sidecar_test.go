package agent

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	jobsetv1alpha2 "github.com/restartbed/restartbed/api/v1alpha2"
)

// TestShippedManifestsUseTheSidecar: the agent sidecar of every JobSet the repository ships (the
// sample and the bundled scenarios' manifests) is Sidecar's, with the manifest's own restart
// rules, so that tests, bench, samples and scenarios run one agent configuration.
func TestShippedManifestsUseTheSidecar(t *testing.T) {
	files, err := filepath.Glob("../scenarios/examples/manifests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../config/samples/jobset-in-place-restart.yaml")
	seen := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var js jobsetv1alpha2.JobSet
			if err := yaml.Unmarshal(doc, &js); err != nil || js.Kind != "JobSet" {
				continue
			}
			for _, rjob := range js.Spec.ReplicatedJobs {
				for _, c := range rjob.Template.Spec.Template.Spec.InitContainers {
					if c.Name != ContainerName {
						continue
					}
					seen++
					if diff := cmp.Diff(Sidecar(c.RestartPolicyRules), c); diff != "" {
						t.Errorf("%s: JobSet %s, replicated Job %s: the agent is not Sidecar's (-Sidecar +manifest):\n%s", file, js.Name, rjob.Name, diff)
					}
				}
			}
		}
	}
	if seen < 4 {
		t.Errorf("found %d agent sidecars in %v; the shipped manifests have at least 4", seen, files)
	}
}
