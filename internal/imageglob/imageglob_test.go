package imageglob

import "testing"

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		glob, image string
		match       bool
	}{
		{"*agent*", "registry.k8s.io/jobset/agent:v0.12", true},
		{"busybox:1.3?", "busybox:1.36", true},
		{"busybox:1.3?", "busybox:1.360", false},
		{"busybox:1.3[67]", "busybox:1.37", true},
		{"busybox:1.3[!67]", "busybox:1.37", false},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"nginx", "docker.io/library/nginx", false}, // the whole reference as written
	} {
		re, err := Compile(tc.glob)
		if err != nil {
			t.Fatalf("%q: %v", tc.glob, err)
		}
		if got := re.MatchString(tc.image); got != tc.match {
			t.Errorf("%q matches %q: %t, want %t", tc.glob, tc.image, got, tc.match)
		}
	}
	for _, bad := range []string{`a\`, "[ab", "[]", "[!]"} {
		if _, err := Compile(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}
