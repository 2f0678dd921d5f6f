package hostproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/restartbed/restartbed/fakekubelet/network"
	"github.com/restartbed/restartbed/fakekubelet/network/networktest"
	"github.com/restartbed/restartbed/internal/procfs"
)

// The test binary is also the processes the tests run in sandboxes, by role.
const roleEnv = "HOSTPROC_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		code := m.Run()
		if helperDir != "" {
			_ = os.RemoveAll(helperDir)
		}
		os.Exit(code)
	case "report":
		host, _ := os.Hostname()
		ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		wd, _ := os.Getwd()
		fmt.Printf("hostname=%s namespace=%s err=%v wd=%s arg=%s env=%s\n", host, ns, err, wd, os.Args[1], os.Getenv("GREETING"))
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(7)
	case "serve":
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, host) })
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() { <-term; fmt.Println("got SIGTERM"); os.Exit(42) }()
		// "serving" only once the port is bound: the tests dial it as soon as they read it.
		ln, err := net.Listen("tcp", ":8081")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("serving")
		if err := http.Serve(ln, nil); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	case "apiserver":
		c, err := net.Dial("tcp", os.Args[1])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
	case "outbound":
		// Resolves a name through /etc/resolv.conf, then reads a line from os.Args[1].
		addrs, err := net.LookupHost(os.Args[2])
		fmt.Printf("%s -> %v %v\n", os.Args[2], addrs, err)
		c, err := net.Dial("tcp", os.Args[1])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
	case "parent":
		// A restartbed stand-in that the test ends: it starts a sandbox with a process, says the
		// helper's PID, and on SIGINT or SIGTERM, or when its stdin ends, closes the host and
		// exits, as restartbed does (SIGKILL leaves it no say).
		h := newTestHost(nil, os.Args[1], os.Args[2])
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			signals <- nil
		}()
		sb, err := h.Sandbox("p", SandboxSpec{Hostname: "orphan", IP: netip.MustParseAddr("10.244.9.9")})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		var out syncBuffer
		self, _ := os.Executable()
		if _, err := sb.Start(context.Background(), ProcessSpec{ID: "c", Binary: self, Argv: []string{"serve"},
			Env: []string{roleEnv + "=serve"}, Stdout: &out}); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		waitUntil(nil, "the server to serve", func() bool { return strings.Contains(out.String(), "serving") })
		fmt.Println("helper", sb.cmd.Process.Pid)
		<-signals
		h.Close()
		os.Exit(0)
	}
}

// helperDir holds the helper once built; TestMain removes it.
var helperDir string

// helper builds the sandbox helper once per test binary.
var helper = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hostproc-helper-")
	if err != nil {
		return "", err
	}
	helperDir = dir
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, HelperSource, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "restartbed-sandbox")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the helper: %w\n%s", err, b)
	}
	return out, nil
})

func newTestHost(t *testing.T, helperPath, dir string) *Host {
	h, err := New(Options{Helper: helperPath, Dir: dir, APIServer: os.Getenv("HOSTPROC_TEST_APISERVER")})
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		fmt.Println(err)
		os.Exit(1)
	}
	return h
}

// requireHostBinaries makes a host that cannot run host binaries fail the tests instead of
// skipping them; CI sets it.
const requireHostBinaries = "RESTARTBED_REQUIRE_HOST_BINARIES"

func skipUnlessHostBinaries(t *testing.T) {
	t.Helper()
	if err := Check(); err != nil {
		if os.Getenv(requireHostBinaries) != "" {
			t.Fatalf("%s is set and this host cannot run host binaries: %v", requireHostBinaries, err)
		}
		t.Skipf("this host cannot run host binaries: %v", err)
	}
}

func hostForTest(t *testing.T, apiserver string) *Host {
	t.Helper()
	skipUnlessHostBinaries(t)
	path, err := helper()
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Helper: path, Dir: t.TempDir(), APIServer: apiserver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lineServer answers every connection with line, on a loopback port of the host.
func lineServer(t *testing.T, line string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, line)
			_ = c.Close()
		}
	}()
	return ln
}

// writeFile writes one of the pod's files into the sandbox, as the runtime does.
func writeFile(t *testing.T, sb *Sandbox, rel, content string) {
	t.Helper()
	name := filepath.Join(sb.FilesDir(), rel)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			if t == nil {
				fmt.Println("timed out waiting for", what)
				os.Exit(1)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProcessSeesItsContainer(t *testing.T) {
	h := hostForTest(t, "")
	sb, err := h.Sandbox("pod-a", SandboxSpec{Hostname: "worker-0", IP: netip.MustParseAddr("10.244.0.5")})
	if err != nil {
		t.Fatal(err)
	}
	// The runtime writes the pod's files through FilesDir; they appear at the mount path.
	writeFile(t, sb, "volumes/sa/namespace", "team-a")
	self, _ := os.Executable()
	var stdout, stderr syncBuffer
	p, err := sb.Start(context.Background(), ProcessSpec{ID: "c1", Binary: self, Argv: []string{"report", "first-arg"},
		Env: []string{roleEnv + "=report", "GREETING=hello"}, Dir: "/work/dir",
		Mounts: []Mount{{Source: "volumes/sa", Target: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 7 {
		t.Errorf("exit code %d, want 7; output %q %q", code, stdout.String(), stderr.String())
	}
	want := "hostname=worker-0 namespace=team-a err=<nil> wd=/work/dir arg=first-arg env=hello\n"
	if stdout.String() != want || stderr.String() != "to stderr\n" {
		t.Errorf("stdout %q, stderr %q; want %q and %q", stdout.String(), stderr.String(), want, "to stderr\n")
	}
}

func TestStartFailsPlainly(t *testing.T) {
	h := hostForTest(t, "")
	sb, err := h.Sandbox("pod-a", SandboxSpec{Hostname: "a", IP: netip.MustParseAddr("10.244.0.5")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Start(context.Background(), ProcessSpec{ID: "c1", Binary: "/no/such/binary", Argv: []string{"x"}})
	if err == nil || !strings.Contains(err.Error(), "/no/such/binary") {
		t.Errorf("starting a missing binary: %v, want an error naming it", err)
	}
}

// Two pods' processes listen on the same port, each in its own network namespace; restartbed
// reaches each through its sandbox; SIGTERM reaches the process and its exit code comes back.
func TestPodsListenOnTheSamePort(t *testing.T) {
	h := hostForTest(t, "")
	self, _ := os.Executable()
	var procs []*Process
	for i, name := range []string{"worker-0", "worker-1"} {
		sb, err := h.Sandbox(name, SandboxSpec{Hostname: name, IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(10 + i)})})
		if err != nil {
			t.Fatal(err)
		}
		var out syncBuffer
		p, err := sb.Start(context.Background(), ProcessSpec{ID: "agent", Binary: self, Argv: []string{"serve"},
			Env: []string{roleEnv + "=serve"}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
		waitUntil(t, name+" to serve", func() bool { return strings.Contains(out.String(), "serving") })
		conn, err := sb.Dial(context.Background(), 8081)
		if err != nil {
			t.Fatal(err)
		}
		client := http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}}
		resp, err := client.Get("http://pod/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(body) != name {
			t.Errorf("port 8081 of %s answered %q", name, body)
		}
		if _, err := sb.Dial(context.Background(), 8082); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dialing a closed port: %v, want ECONNREFUSED", err)
		}
	}
	if err := procs[0].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := procs[0].ExitCode(); code != 42 {
		t.Errorf("exit code after SIGTERM %d, want 42 (the process's own)", code)
	}
	if err := procs[1].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := procs[1].ExitCode(); code != 137 {
		t.Errorf("exit code after SIGKILL %d, want 137", code)
	}
}

func TestTheAPIServerAddressReachesTheAPIServer(t *testing.T) {
	ln := lineServer(t, "apiserver here")
	h := hostForTest(t, ln.Addr().String())
	sb, err := h.Sandbox("pod", SandboxSpec{Hostname: "p", IP: netip.MustParseAddr("10.244.0.7"),
		APIServer: netip.MustParseAddrPort("10.0.0.1:443")})
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	var out syncBuffer
	p, err := sb.Start(context.Background(), ProcessSpec{ID: "c", Binary: self, Argv: []string{"apiserver", "10.0.0.1:443"},
		Env: []string{roleEnv + "=apiserver"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 || out.String() != "apiserver here\n" {
		t.Errorf("exit %d, output %q", code, out.String())
	}
}

// However restartbed ends — normally, on SIGINT, on SIGTERM, killed with SIGKILL — no process of
// a sandbox, and none of its namespaces, outlives it: the helper dies with it and takes the PID
// namespace's processes along, and the namespaces and mounts go with the last of them.
func TestNothingOutlivesRestartbed(t *testing.T) {
	skipUnlessHostBinaries(t)
	path, err := helper()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	for _, ending := range []string{"normal", "SIGINT", "SIGTERM", "SIGKILL"} {
		t.Run(ending, func(t *testing.T) {
			base := t.TempDir()
			cmd := exec.Command(self, path, base)
			cmd.Env = append(os.Environ(), roleEnv+"=parent")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "helper ")))
			if err != nil {
				_ = cmd.Process.Kill()
				t.Fatalf("the parent said %q", line)
			}
			children := procfs.Children(pid)
			if len(children) == 0 {
				t.Fatalf("the helper %d has no child", pid)
			}
			var namespaces []string
			for _, ns := range []string{"mnt", "net", "pid"} {
				link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
				if err != nil {
					t.Fatal(err)
				}
				namespaces = append(namespaces, link)
			}
			switch ending {
			case "normal":
				_ = stdin.Close()
			case "SIGINT":
				_ = cmd.Process.Signal(syscall.SIGINT)
			case "SIGTERM":
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case "SIGKILL":
				_ = cmd.Process.Kill()
			}
			_ = cmd.Wait()
			for _, p := range append(children, pid) {
				waitUntil(t, fmt.Sprintf("process %d to end", p), func() bool { return !procfs.Alive(p) })
			}
			waitUntil(t, "the sandbox's namespaces to go", func() bool { return len(holders(namespaces)) == 0 })
			mounts, _ := os.ReadFile("/proc/self/mountinfo")
			if strings.Contains(string(mounts), base) {
				t.Errorf("a mount under %s is left", base)
			}
		})
	}
}

// holders lists the processes in any of the namespaces (as /proc/PID/ns/* links read).
func holders(namespaces []string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/ns")
	for _, dir := range dirs {
		for _, ns := range []string{"mnt", "net", "pid"} {
			if link, err := os.Readlink(filepath.Join(dir, ns)); err == nil && slices.Contains(namespaces, link) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// An exec runs in the container's root, with its mounts, and returns the command's exit code; a
// command the container does not have fails to start.
func TestExecRunsInTheContainer(t *testing.T) {
	h := hostForTest(t, "")
	sb, err := h.Sandbox("pod", SandboxSpec{Hostname: "worker-0", IP: netip.MustParseAddr("10.244.0.8")})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, sb, "volumes/data/ready", "yes")
	self, _ := os.Executable()
	var out syncBuffer
	p, err := sb.Start(context.Background(), ProcessSpec{ID: "agent", Binary: self, Argv: []string{"serve"},
		Env: []string{roleEnv + "=serve"}, Mounts: []Mount{{Source: "volumes/data", Target: "/data"}}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server to serve", func() bool { return strings.Contains(out.String(), "serving") })
	var stdout, stderr syncBuffer
	code, err := sb.Exec(context.Background(), ExecSpec{Container: "agent", Argv: []string{"sh", "-c", `cat /data/ready; echo " $GREETING $(hostname)"; read line; echo "$line" >&2; exit 3`},
		Env: []string{"GREETING=hi", "PATH=/usr/bin:/bin"}, Stdin: strings.NewReader("from stdin\n"), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || stdout.String() != "yes hi worker-0\n" || stderr.String() != "from stdin\n" {
		t.Errorf("exec: code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if _, err := sb.Exec(context.Background(), ExecSpec{Container: "agent", Argv: []string{"no-such-command"}}); err == nil ||
		!strings.Contains(err.Error(), `"no-such-command": executable file not found in $PATH`) {
		t.Errorf("exec of a missing command: %v", err)
	}
	if _, err := sb.Exec(context.Background(), ExecSpec{Container: "gone", Argv: []string{"true"}}); err == nil {
		t.Error("exec in a container that does not run succeeded")
	}
	_ = p.Signal(syscall.SIGKILL)
	p.ExitCode()
}

// A process reaches other addresses through restartbed (the pod network's Dial) and resolves
// names with the cluster DNS server's answers.
func TestOutboundConnectionsAndDNS(t *testing.T) {
	ln := lineServer(t, "a pod answers")
	var dialed syncBuffer
	h := hostForTest(t, "")
	dns := networktest.New(t, network.Options{DNS: netip.MustParseAddr("10.96.0.10")})
	sb, err := h.Sandbox("pod", SandboxSpec{Hostname: "p", IP: netip.MustParseAddr("10.244.0.9"),
		Dial: func(ctx context.Context, address string) (net.Conn, error) {
			fmt.Fprint(&dialed, address)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		},
		DNS: netip.MustParseAddr("10.96.0.10"), AnswerDNS: dns.AnswerDNS})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, sb, "names/resolv.conf", "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n")
	self, _ := os.Executable()
	var out syncBuffer
	p, err := sb.Start(context.Background(), ProcessSpec{ID: "c", Binary: self, Argv: []string{"outbound", "10.64.3.2:8080", "10-64-1-2.default.pod"},
		Env: []string{roleEnv + "=outbound", "GODEBUG=netdns=go"}, Mounts: []Mount{{Source: "names/resolv.conf", Target: "/etc/resolv.conf"}},
		Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit %d", code)
	}
	if want := "10-64-1-2.default.pod -> [10.64.1.2] <nil>\na pod answers\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if dialed.String() != "10.64.3.2:8080" {
		t.Errorf("restartbed dialed %q, want the address the process connected to", dialed.String())
	}
}
