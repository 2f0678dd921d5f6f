package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarkdown(t *testing.T) {
	log := `go version go1.26.8 linux/amd64
phase assets: 812.4 s wall, 1590.0 s CPU (1.96 cores), exit 0
ok  	github.com/restartbed/restartbed/scenarios	3.101s
ok  	github.com/restartbed/restartbed/timing	(cached)
ok  	github.com/restartbed/restartbed/test/scenarios	639.500s
--- FAIL: TestNodeE2E (1110.00s)
kubernetes: FAIL	restartbed.localhost/upstream/kubernetes	1110.204s
kubernetes: phase test-upstream/kubernetes: 1112.0 s wall, 1500.4 s CPU (1.35 cores), exit 1
phase test: 1500.0 s wall, 2700.0 s CPU (1.80 cores), exit 0
`
	r, err := parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := `| phase | wall | CPU | cores | exit |
|---|---:|---:|---:|---:|
| assets | 13m32s | 26m30s | 1.96 | 0 |
| test-upstream/kubernetes | 18m32s | 25m00s | 1.35 | 1 |
| test | 25m00s | 45m00s | 1.80 | 0 |

| slowest test packages (wall, as go test reports it) | took | result |
|---|---:|---|
| restartbed.localhost/upstream/kubernetes | 18m30s | FAIL |
| github.com/restartbed/restartbed/test/scenarios | 10m40s | ok |
`
	if diff := cmp.Diff(want, r.markdown(2)); diff != "" {
		t.Errorf("markdown (-want +got):\n%s", diff)
	}
}

func TestNoPhase(t *testing.T) {
	_, err := parse(strings.NewReader("ok  \tgithub.com/x/y\t1.0s\n"))
	if err == nil || !strings.Contains(err.Error(), "no phase line") {
		t.Fatalf("got %v, want an error saying the log has no phase line", err)
	}
}
