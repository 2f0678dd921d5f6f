package main

import "testing"

// The replay command explore prints must paste into a shell as one command.
func TestShellWords(t *testing.T) {
	got := shellWords([]string{"restartbed", "run", "--controller", "./bin/manager --name='a b'", "--crds", "config/crd", ""})
	want := `restartbed run --controller './bin/manager --name='\''a b'\''' --crds config/crd ''`
	if got != want {
		t.Errorf("shellWords = %s, want %s", got, want)
	}
}
