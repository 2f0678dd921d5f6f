package knownimages

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/restartbed/restartbed/fakekubelet/shell"
)

// agnhostVersion is the agnhost release whose behaviour the subcommands follow.
const agnhostVersion = "2.53"

// agnhostCommands are agnhost's subcommands restartbed runs, by name.
var agnhostCommands = map[string]func(ctx context.Context, inv *shell.Invocation, args []string) int{
	"pause":             agnhostPause,
	"netexec":           netexec,
	"serve-hostname":    serveHostname,
	"liveness":          liveness,
	"entrypoint-tester": entrypointTester,
	"test-webserver":    testWebserver,
}

// agnhost is upstream's e2e image's /agnhost: one subcommand, named by its first argument.
func agnhost(ctx context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 || inv.Args[1] == "help" || inv.Args[1] == "--help" || inv.Args[1] == "-h" {
		fmt.Fprintf(inv.Env.Stdout, "agnhost %s: restartbed runs these subcommands: %s\n", agnhostVersion, strings.Join(agnhostNames(), ", "))
		return 0
	}
	if inv.Args[1] == "--version" {
		fmt.Fprintf(inv.Env.Stdout, "app version %s\n", agnhostVersion)
		return 0
	}
	sub := agnhostCommands[inv.Args[1]]
	if sub == nil {
		fmt.Fprintf(inv.Env.Stderr, "Error: unknown command %q for \"app\"\nRun 'app --help' for usage.\n", inv.Args[1])
		return 1
	}
	return sub(ctx, inv, inv.Args[2:])
}

func agnhostNames() []string { return slices.Sorted(maps.Keys(agnhostCommands)) }

// flags parses a subcommand's flags as cobra does: a bad flag prints the error and exits 1.
func flags(inv *shell.Invocation, name string, args []string, define func(fs *pflag.FlagSet)) bool {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(inv.Env.Stderr, "Error: %v\n", err)
		return false
	}
	if fs.NArg() > 0 && name != "entrypoint-tester" {
		fmt.Fprintf(inv.Env.Stderr, "Error: accepts at most 0 arg(s), received %d\n", fs.NArg())
		return false
	}
	return true
}

// agnhostPause prints that it paused, waits for SIGTERM or SIGINT, writes why it exits to the
// termination message file and to stdout, and exits 2 (SIGTERM).
func agnhostPause(ctx context.Context, inv *shell.Invocation, args []string) int {
	if !flags(inv, "pause", args, func(*pflag.FlagSet) {}) {
		return 1
	}
	fmt.Fprintln(inv.Env.Stdout, "Paused")
	fmt.Fprintln(inv.Env.Stdout, "Signals registered")
	if !terminated(ctx, inv) {
		return shell.ExitKilled
	}
	path := getenv(inv, "TERMINATION_MESSAGE_PATH")
	if path == "" {
		path = "/dev/termination-log"
	}
	msg := "exiting because of signal \"terminated\"\n"
	_ = inv.Env.FS.WriteFile(path, []byte(msg)) // as agnhost, which ignores the error
	fmt.Fprint(inv.Env.Stdout, msg)
	return 2
}

// entrypointTester prints the process's arguments as Go prints os.Args, and exits 0.
func entrypointTester(_ context.Context, inv *shell.Invocation, _ []string) int {
	fmt.Fprintf(inv.Env.Stdout, "%v\n", inv.Args)
	return 0
}

// liveness serves on 8080: /healthz answers 200 "ok" for the first 10 seconds, then 500;
// /started says how long it has run; /redirect redirects to ?loc=. It dies of SIGTERM (143).
func liveness(ctx context.Context, inv *shell.Invocation, args []string) int {
	if !flags(inv, "liveness", args, func(*pflag.FlagSet) {}) {
		return 1
	}
	clock := inv.Env.Clock
	started := clock.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("/started", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, clock.Since(started).String())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if d := clock.Since(started); d.Seconds() > 10 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "error: %v", d.Seconds())
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("loc"), http.StatusFound)
	})
	return serveUntilTerm(ctx, inv, 8080, mux, shell.ExitTerminated, func(err error) { logf(inv, "%v", err) })
}

// serveHostname answers with the pod's hostname over HTTP (default) or raw TCP on --port
// (9376). On SIGTERM it logs, waits 60 seconds for the pod's deletion, and exits 0.
func serveHostname(ctx context.Context, inv *shell.Invocation, args []string) int {
	var doTCP, doUDP, doHTTP, doClose bool
	var port int
	if !flags(inv, "serve-hostname", args, func(fs *pflag.FlagSet) {
		fs.BoolVar(&doTCP, "tcp", false, "")
		fs.BoolVar(&doUDP, "udp", false, "")
		fs.BoolVar(&doHTTP, "http", true, "")
		fs.BoolVar(&doClose, "close", false, "")
		fs.IntVar(&port, "port", 9376, "")
	}) {
		return 1
	}
	if doHTTP && (doTCP || doUDP) {
		logf(inv, "Can't server TCP/UDP mode and HTTP mode at the same time")
		return 1
	}
	if doUDP {
		logf(inv, "Error from ListenUDP(): restartbed's pod network carries TCP only")
		return 1
	}
	hostname := inv.Env.Hostname
	var stop func()
	var err error
	if doTCP {
		stop, err = serveTCP(inv, port, func(c net.Conn) {
			logf(inv, "TCP request from %s", c.RemoteAddr())
			_, _ = io.WriteString(c, hostname)
		})
	} else if doHTTP {
		stop, err = serveHTTP(inv, port, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			logf(inv, "HTTP request from %s", r.RemoteAddr)
			if doClose {
				w.Header().Add("Connection", "close")
			}
			fmt.Fprint(w, hostname)
		}))
	}
	if err != nil {
		logf(inv, "Error from net.Listen(): %v", err)
		return 1
	}
	if stop != nil {
		defer stop()
	}
	logf(inv, "Serving on port %d.", port)
	if !terminated(ctx, inv) {
		return shell.ExitKilled
	}
	logf(inv, "Shutting down after receiving signal: terminated.")
	logf(inv, "Awaiting pod deletion.")
	if !inv.Env.Sleep(ctx, 60*time.Second) {
		return shell.ExitKilled
	}
	return 0
}

// testWebserver serves the container's files on --port (80); it dies of SIGTERM (143).
func testWebserver(ctx context.Context, inv *shell.Invocation, args []string) int {
	var port int
	if !flags(inv, "test-webserver", args, func(fs *pflag.FlagSet) { fs.IntVar(&port, "port", 80, "") }) {
		return 1
	}
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		data, err := inv.Env.FS.ReadFile(r.URL.Path)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	})
	return serveUntilTerm(ctx, inv, port, files, shell.ExitTerminated, func(err error) { logf(inv, "%v", err) })
}

// netexec serves agnhost's HTTP test endpoints on --http-port (8080). On SIGTERM /readyz answers
// 503 and the process exits 0 after --delay-shutdown seconds; /exit and /shutdown end it too.
func netexec(ctx context.Context, inv *shell.Invocation, args []string) int {
	var httpPort, udpPort, sctpPort, delayShutdown int
	var httpOverride, udpListen, certFile, keyFile string
	if !flags(inv, "netexec", args, func(fs *pflag.FlagSet) {
		fs.IntVar(&httpPort, "http-port", 8080, "")
		fs.IntVar(&udpPort, "udp-port", 8081, "")
		fs.IntVar(&sctpPort, "sctp-port", -1, "")
		fs.IntVar(&delayShutdown, "delay-shutdown", 0, "")
		fs.StringVar(&httpOverride, "http-override", "", "")
		fs.StringVar(&udpListen, "udp-listen-addresses", "", "")
		fs.StringVar(&certFile, "tls-cert-file", "", "")
		fs.StringVar(&keyFile, "tls-private-key-file", "", "")
	}) {
		return 1
	}
	if certFile != "" {
		logf(inv, "netexec over TLS is not emulated (--tls-cert-file)")
		return 1
	}
	n := &netexecServer{inv: inv, port: httpPort, exit: make(chan int, 1), termed: make(chan struct{})}
	mux := http.NewServeMux()
	n.routes(mux)
	var h http.Handler = mux
	if httpOverride != "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, httpOverride, nil)
			if err != nil {
				http.Error(w, fmt.Sprintf("override request failed: %v", err), http.StatusInternalServerError)
				return
			}
			req.RemoteAddr = r.RemoteAddr
			mux.ServeHTTP(w, req)
		})
	}
	stop, err := serveHTTP(inv, httpPort, h)
	if err != nil {
		logf(inv, "%v", err)
		return 1
	}
	defer stop()
	logf(inv, "Started HTTP server on port %d", httpPort)
	// agnhost answers /healthz once its UDP server is up; restartbed's pod network carries no
	// UDP, so it is ready with its HTTP server.
	select {
	case code := <-n.exit:
		return code
	case <-ctx.Done():
		return shell.ExitKilled
	case <-inv.Term:
	}
	close(n.termed)
	if delayShutdown <= 0 {
		return 0
	}
	logf(inv, "Sleeping %d seconds before terminating...", delayShutdown)
	t := inv.Env.Clock.NewTimer(time.Duration(delayShutdown) * time.Second)
	defer t.Stop()
	select {
	case code := <-n.exit:
		return code
	case <-ctx.Done():
		return shell.ExitKilled
	case <-t.C():
		return 0
	}
}

// netexecServer is one netexec's endpoints.
type netexecServer struct {
	inv  *shell.Invocation
	port int
	// exit takes the exit code /exit or /shutdown asks for.
	exit chan int
	// termed is closed by SIGTERM.
	termed chan struct{}
}

func (n *netexecServer) routes(mux *http.ServeMux) {
	inv := n.inv
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		logf(inv, "GET /")
		fmt.Fprintf(w, "NOW: %v", inv.Env.Clock.Now())
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) {
		logf(inv, "GET /clientip")
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("/serverport", func(w http.ResponseWriter, _ *http.Request) {
		logf(inv, "GET /serverport")
		fmt.Fprint(w, n.port)
	})
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		if key := r.FormValue("key"); key != "" {
			logf(inv, "GET /header?key=%s", key)
			fmt.Fprint(w, r.Header.Get(key))
			return
		}
		logf(inv, "GET /header")
		data, _ := json.Marshal(r.Header) // a header map always marshals
		_, _ = w.Write(data)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		msg, codeString := r.FormValue("msg"), r.FormValue("code")
		logf(inv, "GET /echo?msg=%s&code=%s", msg, codeString)
		if codeString != "" {
			code, err := strconv.Atoi(codeString)
			if err != nil {
				fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
				return
			}
			w.WriteHeader(code)
		}
		fmt.Fprint(w, msg)
	})
	mux.HandleFunc("/exit", n.exitHandler)
	mux.HandleFunc("/shutdown", func(http.ResponseWriter, *http.Request) {
		logf(inv, "GET /shutdown")
		n.exitWith(0)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		logf(inv, "GET /healthz")
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		logf(inv, "GET /readyz")
		select {
		case <-n.termed:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "shutting down")
		default:
			fmt.Fprint(w, "ok")
		}
	})
	hostname := func(w http.ResponseWriter, r *http.Request) {
		logf(inv, "GET %s", r.URL.Path)
		fmt.Fprint(w, inv.Env.Hostname)
	}
	mux.HandleFunc("/hostname", hostname)
	mux.HandleFunc("/hostName", hostname)
	mux.HandleFunc("/envvar", func(w http.ResponseWriter, r *http.Request) {
		name := r.FormValue("var")
		if name == "" {
			http.Error(w, "'var' query parameter is required", http.StatusBadRequest)
			return
		}
		logf(inv, "GET /envvar?var=%s", name)
		v, ok := lookupEnv(inv, name)
		if !ok {
			http.Error(w, fmt.Sprintf("env var %q is not set", name), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, v)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		location, codeString := r.FormValue("location"), r.FormValue("code")
		logf(inv, "%s /redirect?msg=%s&code=%s", r.Method, location, codeString)
		code := http.StatusFound
		if codeString != "" {
			var err error
			if code, err = strconv.Atoi(codeString); err != nil {
				fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
				return
			}
		}
		http.Redirect(w, r, location, code)
	})
	mux.HandleFunc("/shell", func(w http.ResponseWriter, r *http.Request) {
		cmd := r.FormValue("shellCommand")
		if cmd == "" {
			cmd = r.FormValue("cmd")
		}
		logf(inv, "GET /shell?cmd=%s", cmd)
		var out strings.Builder
		env := inv.Env
		env.Stdout, env.Stderr, env.Stdin = &out, &out, nil
		code := shell.Exec(r.Context(), []string{"/bin/sh", "-c", cmd}, env)
		output := map[string]string{}
		if out.Len() > 0 {
			output["output"] = out.String()
		}
		if code != 0 {
			output["error"] = fmt.Sprintf("exit status %d", code)
		}
		data, _ := json.Marshal(output) // strings always marshal
		_, _ = w.Write(data)
	})
	mux.HandleFunc("/dial", n.dialHandler)
}

func (n *netexecServer) exitWith(code int) {
	select {
	case n.exit <- code:
	default: // an exit is already under way
	}
}

func (n *netexecServer) exitHandler(w http.ResponseWriter, r *http.Request) {
	inv := n.inv
	waitString, timeoutString, codeString := r.FormValue("wait"), r.FormValue("timeout"), r.FormValue("code")
	logf(inv, "GET /exit?code=%s&timeout=%s&wait=%s", codeString, timeoutString, waitString)
	if _, err := time.ParseDuration(timeoutString); err != nil && timeoutString != "" {
		fmt.Fprintf(w, "argument 'timeout' must be a valid golang duration or empty, got %q\n", timeoutString)
		return
	}
	wait, err := time.ParseDuration(waitString)
	if err != nil && waitString != "" {
		fmt.Fprintf(w, "argument 'wait' must be a valid golang duration or empty, got %q\n", waitString)
		return
	}
	code, err := strconv.Atoi(codeString)
	if err != nil && codeString != "" {
		fmt.Fprintf(w, "argument 'code' must be an integer [0-127] or empty, got %q\n", codeString)
		return
	}
	logf(inv, "Will begin shutdown in %s, then will exit with %d", wait, code)
	if wait > 0 && !inv.Env.Sleep(r.Context(), wait) {
		return
	}
	n.exitWith(code)
}

// dialHandler asks another server, over HTTP, for ?request= on ?host=:?port=, ?tries= times,
// and answers {"responses": [...], "errors": [...]}.
func (n *netexecServer) dialHandler(w http.ResponseWriter, r *http.Request) {
	inv := n.inv
	q := r.URL.Query()
	host, port, request, protocol, tryParam := q.Get("host"), q.Get("port"), q.Get("request"), q.Get("protocol"), q.Get("tries")
	logf(inv, "GET /dial?host=%s&protocol=%s&port=%s&request=%s&tries=%s", host, protocol, port, request, tryParam)
	tries := 1
	if tryParam != "" {
		var err error
		if tries, err = strconv.Atoi(tryParam); err != nil {
			http.Error(w, fmt.Sprintf("tries parameter is invalid. %v", err), http.StatusBadRequest)
			return
		}
	}
	if request == "" {
		http.Error(w, "request parameter not specified. <nil>", http.StatusBadRequest)
		return
	}
	switch strings.ToLower(protocol) {
	case "", "http":
	case "udp", "sctp":
		http.Error(w, fmt.Sprintf("unsupported protocol. %s (restartbed's pod network carries TCP only)", protocol), http.StatusBadRequest)
		return
	default:
		http.Error(w, fmt.Sprintf("unsupported protocol. %s", protocol), http.StatusBadRequest)
		return
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return inv.Env.Dial(ctx, addr) }}}
	output := map[string][]string{}
	for range tries {
		resp, err := client.Get("http://" + net.JoinHostPort(host, port) + "/" + request)
		if err == nil {
			var body []byte
			body, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close() // read whole
			if err == nil {
				output["responses"] = append(output["responses"], string(body))
				continue
			}
		}
		output["errors"] = append(output["errors"], err.Error())
	}
	data, _ := json.Marshal(output) // strings always marshal
	_, _ = w.Write(data)
}

// lookupEnv reads the process's environment; the last definition wins.
func lookupEnv(inv *shell.Invocation, name string) (string, bool) {
	for i := len(inv.Env.Vars) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(inv.Env.Vars[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func getenv(inv *shell.Invocation, name string) string {
	v, _ := lookupEnv(inv, name)
	return v
}
