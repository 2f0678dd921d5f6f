package shell

import (
	"context"
	"strings"
	"testing"
	"testing/iotest"
)

// sh with no script runs the commands its stdin gives, line by line, keeping its state between
// them (kubectl exec -i ... sh).
func TestInteractiveShell(t *testing.T) {
	env, out, _ := newEnv(t)
	env.Stdin = strings.NewReader("x=4\necho $((x * 2))\nif true; then\necho in\nfi\ncd /tmp; pwd\nexit 3\necho never\n")
	if code := Exec(context.Background(), []string{"sh"}, env); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if got, want := out.String(), "8\nin\n/tmp\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// On a terminal the shell prompts, the terminal echoes what is typed and erases on DEL, Enter
// (CR) ends a line, output lines end in CR LF, and ^D ends the input.
func TestInteractiveTerminal(t *testing.T) {
	env, out, _ := newEnv(t)
	env.TTY = true
	// One key at a time, as typed.
	env.Stdin = iotest.OneByteReader(strings.NewReader("echo hix\x7f\rif true\rthen echo ok; fi\r\x04"))
	if code := Exec(context.Background(), []string{"sh"}, env); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	want := "/ # echo hix\b \b\r\nhi\r\n/ # if true\r\n> then echo ok; fi\r\nok\r\n/ # "
	if got := out.String(); got != want {
		t.Errorf("terminal shows %q, want %q", got, want)
	}
}
