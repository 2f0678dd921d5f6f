package main

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestCheck(t *testing.T) {
	fsys := fstest.MapFS{
		"main.go":        {Data: []byte("package main\n")},
		"restartbed":     {Data: []byte("\x7fELF\x02\x01\x01\x00rest"), Mode: 0o755},
		"lib.a":          {Data: []byte("!<arch>\n__.PKGDEF")},
		"tool.exe":       {Data: []byte("MZ\x90\x00")},
		"bin-darwin":     {Data: []byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}, Mode: 0o755},
		"hack/run.sh":    {Data: []byte("#!/usr/bin/env bash\necho hi\n"), Mode: 0o755},
		"data.txt":       {Data: []byte("text, but executable"), Mode: 0o755},
		"big.yaml":       {Data: []byte(strings.Repeat("a: b\n", maxSize/5+1))},
		"crd.yaml":       {Data: []byte(strings.Repeat("a: b\n", 800_000/5))},
		"empty":          {Data: nil},
		"tiny-exec-file": {Data: []byte("x"), Mode: 0o700},
	}
	for path, want := range map[string]string{
		"main.go":        "",
		"restartbed":     "ELF",
		"lib.a":          "ar archive",
		"tool.exe":       "PE",
		"bin-darwin":     "Mach-O",
		"hack/run.sh":    "",
		"data.txt":       "no script",
		"big.yaml":       "over the",
		"crd.yaml":       "",
		"empty":          "",
		"tiny-exec-file": "no script",
		"gone":           "",
	} {
		got, err := check(fsys, path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: check says %q, want one containing %q", path, got, want)
		}
	}
}
