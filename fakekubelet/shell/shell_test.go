package shell

import (
	"bytes"
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/fakekubelet/vfs"
	"github.com/restartbed/restartbed/internal/clocktest"
)

func newEnv(t *testing.T) (Env, *bytes.Buffer, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var out bytes.Buffer
	pod := vfs.NewStore(clk).NewPod()
	fs := pod.NewFS()
	if err := fs.Mount("/mnt/data", pod.NewVolume()); err != nil {
		t.Fatal(err)
	}
	return Env{FS: fs, Vars: []string{"POD_NAME=p-0"}, Stdout: &out, Stderr: &out, Clock: clk, Hostname: "p-0"}, &out, clk
}

func TestScripts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		argv   []string
		code   int
		output string
	}{
		{"exit code", []string{"sh", "-c", "exit 42"}, 42, ""},
		{"marker file, first run", []string{"/bin/sh", "-c", "if [ -f /mnt/data/marker ]; then exit 0; fi; touch /mnt/data/marker; exit 1"}, 1, ""},
		{"bash regex and expansion", []string{"bash", "-c", `x=worker-3; [[ $x =~ ^worker-([0-9]+)$ ]] && echo "${BASH_REMATCH[1]} ${x%-*} ${x/worker/w} ${#x}"`}, 0, "3 worker w-3 8\n"},
		{"downward env", []string{"sh", "-c", `echo "$POD_NAME $HOSTNAME"`}, 0, "p-0 p-0\n"},
		{"globs see the virtual tree only", []string{"sh", "-c", "touch /tmp/a.x /tmp/b.x; echo /tmp/*.x; ls /etc"}, 0, "/tmp/a.x /tmp/b.x\n"},
		{"host files do not exist", []string{"sh", "-c", "cat /etc/hostname"}, 1, "cat: /etc/hostname: No such file or directory\n"},
		{"unknown command", []string{"sh", "-c", "gcc -o x x.c"}, 127, "sh: gcc: not found\n"},
		{"command -v does not search the host", []string{"sh", "-c", "command -v sleep; command -v gcc || echo none"}, 0, "/bin/sleep\nnone\n"},
		{"utility as entrypoint", []string{"/bin/false"}, 1, ""},
		{"script arguments", []string{"sh", "-c", `echo "$0 $1 $#"`, "name", "one"}, 0, "name one 1\n"},
		{"-e stops at the first failure", []string{"sh", "-ec", "false; echo unreachable"}, 1, ""},
		{"redirections and pipes", []string{"sh", "-c", "echo a > /tmp/f; echo b >> /tmp/f; cat /tmp/f | wc -l; grep -c b /tmp/f; echo x >/dev/null"}, 0, "2\n1\n"},
		{"grep -o", []string{"sh", "-c", `echo '{"kind": "APIVersions", "x": 1}' | grep -o '"kind": *"[A-Za-z]*"'`}, 0, "\"kind\": \"APIVersions\"\n"},
		{"process substitution is refused", []string{"bash", "-c", "cat <(echo hi)"}, 2, "bash: process substitution is not supported by restartbed's shell\n"},
		{"syntax error", []string{"sh", "-c", "if then"}, 2, ""},
		{"seq and arithmetic", []string{"sh", "-c", "s=0; for i in $(seq 3); do s=$((s+i)); done; echo $s"}, 0, "6\n"},
		{"date on the component clock", []string{"date", "+%s"}, 0, "1767323045\n"},
		// The timestamp upstream's node e2e container scripts write (container_lifecycle_pod_construction.go).
		{"milliseconds from nmeter", []string{"sh", "-c", "echo `date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z` started"}, 0, "2026-01-02T03:04:05.000Z started\n"},
		{"head ends an endless pipe", []string{"sh", "-c", "nmeter -d 0 'at %t %%' | head -n 2"}, 0, "at 03:04:05 %\nat 03:04:05 %\n"},
		{"head keeps a last line as it is", []string{"sh", "-c", "echo -n ab | head -n1; echo; echo -e 'a\\nb\\nc' | head -2"}, 0, "ab\na\nb\n"},
		{"nmeter has no host counters", []string{"nmeter", "%c"}, 1, "nmeter: %c: restartbed's nmeter prints only the time (%t, %Nt); an emulated container has no CPU, memory or I/O counters\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, out, _ := newEnv(t)
			code := Exec(context.Background(), tc.argv, env)
			if code != tc.code {
				t.Errorf("exit code %d, want %d (output %q)", code, tc.code, out.String())
			}
			if tc.name != "syntax error" && out.String() != tc.output {
				t.Errorf("output %q, want %q", out.String(), tc.output)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	if err := Check([]string{"/usr/bin/python3", "train.py"}, nil); err == nil {
		t.Error("Check accepted a program restartbed cannot run")
	}
	for _, argv := range [][]string{{"sh", "-c", "x"}, {"/bin/bash"}, {"sleep", "1"}, {"echo", "x"}} {
		if err := Check(argv, nil); err != nil {
			t.Errorf("Check(%q): %v", argv, err)
		}
	}
}

func TestMarkerFileSurvivesOnVolumeOnly(t *testing.T) {
	env, _, clk := newEnv(t)
	pod := vfs.NewStore(clk).NewPod()
	vol := pod.NewVolume()
	script := []string{"sh", "-c", "if [ -f /mnt/data/marker ] && [ ! -f /tmp/own ]; then exit 0; fi; touch /mnt/data/marker /tmp/own; exit 1"}
	for i, want := range []int{1, 0} {
		fs := pod.NewFS() // a restarted container gets a fresh tree
		if err := fs.Mount("/mnt/data", vol); err != nil {
			t.Fatal(err)
		}
		env.FS = fs
		if got := Exec(context.Background(), script, env); got != want {
			t.Fatalf("run %d: exit %d, want %d", i, got, want)
		}
	}
}

// runMain starts RunMain and returns its term and kill cancels and a channel with the code.
func runMain(env Env, argv []string) (context.CancelFunc, context.CancelFunc, <-chan int) {
	term, sigterm := context.WithCancel(context.Background())
	kill, sigkill := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- RunMain(term, kill, argv, env) }()
	return sigterm, sigkill, done
}

func TestSleepFollowsTheClock(t *testing.T) {
	env, _, clk := newEnv(t)
	waiters := clk.Waiters()
	_, sigkill, done := runMain(env, []string{"sh", "-c", "sleep 10; exit 3"})
	defer sigkill()
	clocktest.WaitForWaiters(t, clk, waiters+1, "the script's sleep")
	clk.Step(9 * time.Second)
	select {
	case code := <-done:
		t.Fatalf("exited with %d before the clock reached 10s", code)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	if code := <-done; code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
}

func TestPID1IgnoresSIGTERMUnlessTrapped(t *testing.T) {
	env, _, clk := newEnv(t)
	waiters := clk.Waiters()
	sigterm, sigkill, done := runMain(env, []string{"sh", "-c", "sleep 3600"})
	clocktest.WaitForWaiters(t, clk, waiters+1, "the script's sleep")
	sigterm()
	select {
	case code := <-done:
		t.Fatalf("an untrapped SIGTERM ended the script with %d", code)
	case <-time.After(50 * time.Millisecond):
	}
	sigkill()
	if code := <-done; code != ExitKilled {
		t.Fatalf("exit %d after SIGKILL, want %d", code, ExitKilled)
	}

	waiters = clk.Waiters()
	sigterm, sigkill, done = runMain(env, []string{"sh", "-c", "trap 'echo bye; exit 0' TERM; sleep 3600"})
	defer sigkill()
	clocktest.WaitForWaiters(t, clk, waiters+1, "the trapping script's sleep")
	sigterm()
	if code := <-done; code != 0 {
		t.Fatalf("trapped SIGTERM: exit %d, want the trap's 0", code)
	}
}

// TestKillPID1 signals a container's main process from another of its processes, as kubectl
// exec CONTAINER -- kill 1 does.
func TestKillPID1(t *testing.T) {
	env, _, clk := newEnv(t)
	env.Init = &Init{}
	kill := func(args ...string) (int, string) {
		var out bytes.Buffer
		execEnv := env
		execEnv.Stdout, execEnv.Stderr = &out, &out
		return Exec(context.Background(), append([]string{"kill"}, args...), execEnv), out.String()
	}
	if code, out := kill("1"); code != 1 || out != "kill: can't kill pid 1: No such process\n" {
		t.Fatalf("kill 1 with no process: %d %q", code, out)
	}

	// Untrapped, SIGTERM and SIGKILL from inside the container are discarded: PID 1 runs on.
	waiters := clk.Waiters()
	_, sigkill, done := runMain(env, []string{"sh", "-c", "sleep 3600"})
	clocktest.WaitForWaiters(t, clk, waiters+1, "the script's sleep")
	for _, args := range [][]string{{"1"}, {"-KILL", "1"}, {"-s", "SIGTERM", "1"}, {"-0", "1"}} {
		if code, out := kill(args...); code != 0 || out != "" {
			t.Errorf("kill %q: %d %q, want 0", args, code, out)
		}
	}
	select {
	case code := <-done:
		t.Fatalf("an untrapped signal ended PID 1 with %d", code)
	default:
	}
	sigkill()
	<-done

	// Trapped, SIGTERM runs the trap.
	waiters = clk.Waiters()
	var mainOut bytes.Buffer
	mainEnv := env
	mainEnv.Stdout, mainEnv.Stderr = &mainOut, &mainOut
	_, sigkill, done = runMain(mainEnv, []string{"/bin/sh", "-c", "trap 'echo bye; exit 0' TERM; trap 'echo int' INT; sleep 3600 & wait $!"})
	defer sigkill()
	clocktest.WaitForWaiters(t, clk, waiters+1, "the trapping script's sleep")
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-INT", "1"}, 1, "kill: can't kill pid 1: the script traps SIGINT, which restartbed's shell does not deliver\n"},
		{[]string{"-BOGUS", "1"}, 1, "kill: bad signal name 'BOGUS'\n"},
		{[]string{"7"}, 1, "kill: can't kill pid 7: No such process\n"},
		{[]string{"g1"}, 1, "kill: can't kill pid g1: a background job cannot be signalled by restartbed's shell\n"},
		{[]string{"-l"}, 0, "HUP INT QUIT KILL USR1 USR2 TERM\n"},
		{[]string{"1"}, 0, ""},
	} {
		if code, out := kill(tc.args...); code != tc.code || out != tc.out {
			t.Errorf("kill %q: %d %q, want %d %q", tc.args, code, out, tc.code, tc.out)
		}
	}
	if code := <-done; code != 0 || mainOut.String() != "bye\n" {
		t.Fatalf("kill 1 with a TERM trap: exit %d output %q, want the trap's 0 and bye", code, mainOut.String())
	}
	if code, _ := kill("-0", "1"); code != 1 {
		t.Errorf("kill -0 1 after PID 1 exited: %d, want 1", code)
	}
}
