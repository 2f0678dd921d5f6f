package controlplane

import (
	"strings"
	"testing"
)

func TestGatesCheck(t *testing.T) {
	gates, err := parseGates([]byte(`[
		{"name":"Alpha","default":false,"preRelease":"ALPHA","dependsOn":["Beta"]},
		{"name":"Beta","default":true,"preRelease":"BETA"},
		{"name":"Done","default":true,"preRelease":"","lockToDefault":true}
	]`), "test")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		settings map[string]bool
		wantErr  []string
	}{
		{name: "defaults", settings: nil},
		{name: "alpha on, its dependency on by default", settings: map[string]bool{"Alpha": true}},
		{name: "locked at its default", settings: map[string]bool{"Done": true}},
		{
			name:     "everything wrong at once",
			settings: map[string]bool{"Alpha": true, "Beta": false, "Done": false, "Nope": true},
			wantErr: []string{
				"feature gates of Kubernetes v1.0.0: ",
				"unrecognized feature gate: Nope",
				"cannot set feature gate Done to false, feature is locked to true",
				"Alpha is enabled, but depends on features that are disabled: [Beta]",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := gates.Check(tc.settings, "v1.0.0")
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check() = nil, want %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Check() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
	if !gates.Enabled(map[string]bool{"Beta": false}, "Done") || gates.Enabled(nil, "Alpha") || gates.Enabled(nil, "Nope") {
		t.Error("Enabled() does not fall back to the defaults, or knows an unknown gate")
	}
}
