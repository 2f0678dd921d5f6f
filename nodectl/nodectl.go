// Package nodectl is the host's side of restartbed's emulated nodes: what a node's systemd and
// its kubelet's healthz port are to the tools and test suites that drive a real node. Each node's
// kubelet is a unit, kubelet-NODE.service, that can be listed, stopped, started and restarted
// through a control API on a Unix socket (which `restartbed systemctl` speaks, with systemctl's
// verbs and output), and each kubelet answers /healthz on a loopback port of its own, as the
// kubelet's healthzPort (10248) does on its machine. The same API injects a scenario's faults
// into the nodes and pods of another process (a node's partition, a container's exit, ...), so
// that scenarios and benchmarks drive nodes wherever they run.
//
// It owns the unit names, the control API and the healthz servers. It emulates nothing itself:
// what stopping or starting a kubelet, or a fault, does is fakekubelet's (Kubelet.StopKubelet,
// StartKubelet, FailNode, ...).
package nodectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/restartbed/restartbed/internal/hangup"
)

// Kubelets are the emulated kubelets a Server drives (fakekubelet.Kubelet).
type Kubelets interface {
	NodeNames() []string
	StopKubelet(node string) error
	StartKubelet(ctx context.Context, node string) error
	KubeletStopped(node string) (bool, error)
}

// UnitName is the systemd unit of the node's kubelet: kubelet-NODE.service, where every rune of
// the node's name but letters, digits and '_' becomes '_', so that the name is one word after
// "kubelet-" (upstream's node e2e framework finds the unit with the pattern kubelet-\w+).
func UnitName(node string) string {
	word := strings.Map(func(r rune) rune {
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '_'
	}, node)
	return "kubelet-" + word + ".service"
}

// Unit is one kubelet unit as the control API reports it.
type Unit struct {
	// Name is the unit's name (UnitName).
	Name string `json:"name"`
	// Node is the node whose kubelet the unit runs.
	Node string `json:"node"`
	// Active is systemd's ACTIVE column: "active" or "inactive".
	Active string `json:"active"`
	// Sub is systemd's SUB column: "running" or "dead".
	Sub string `json:"sub"`
}

// Running reports whether the unit's kubelet runs.
func (u Unit) Running() bool { return u.Active == "active" }

// Operations on a unit, the control API's verbs: systemctl's that a kubelet unit answers.
const (
	OpStart       = "start"
	OpStop        = "stop"
	OpRestart     = "restart"
	OpKill        = "kill"
	OpResetFailed = "reset-failed"
)

// Ops are the operations, in the order help texts list them.
var Ops = []string{OpStart, OpStop, OpRestart, OpKill, OpResetFailed}

// Server serves the control API of a set of kubelets:
//
//	GET  /v1/units               the units, by node name
//	GET  /v1/units/UNIT          one unit
//	POST /v1/units/UNIT/OP       OP is start, stop, restart, kill or reset-failed
//
// and, when the kubelets also implement Faults, the faults (serveFaults), and when they implement
// Watcher, GET /v1/stats (Stats).
//
// UNIT is a unit's name with or without ".service". Errors are JSON {"error": MESSAGE} with 404 for
// a unit that does not exist and 400 for a verb that does not.
type Server struct {
	kubelets Kubelets
	mux      *http.ServeMux
}

// NewServer returns the control API of the kubelets.
func NewServer(kubelets Kubelets) *Server {
	s := &Server{kubelets: kubelets, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /v1/units", s.list)
	s.mux.HandleFunc("GET /v1/units/{unit}", s.get)
	s.mux.HandleFunc("POST /v1/units/{unit}/{op}", s.operate)
	if f, ok := kubelets.(Faults); ok {
		s.serveFaults(f)
	}
	if w, ok := kubelets.(Watcher); ok {
		s.serveStats(w)
	}
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Serve serves the control API on a Unix socket at path (0600: it stops kubelets) until ctx
// ends. The socket file is removed when it returns.
func (s *Server) Serve(ctx context.Context, path string) (<-chan error, error) {
	l, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("the node control socket: %w", err)
	}
	return serve(ctx, l, s), nil
}

func (s *Server) units() ([]Unit, error) {
	names := slices.Sorted(slices.Values(s.kubelets.NodeNames()))
	out := make([]Unit, 0, len(names))
	for _, node := range names {
		stopped, err := s.kubelets.KubeletStopped(node)
		if err != nil {
			return nil, err
		}
		u := Unit{Name: UnitName(node), Node: node, Active: "active", Sub: "running"}
		if stopped {
			u.Active, u.Sub = "inactive", "dead"
		}
		out = append(out, u)
	}
	return out, nil
}

// unit finds the unit named name, with or without ".service".
func (s *Server) unit(name string) (Unit, bool, error) {
	if !strings.HasSuffix(name, ".service") {
		name += ".service"
	}
	units, err := s.units()
	if err != nil {
		return Unit{}, false, err
	}
	i := slices.IndexFunc(units, func(u Unit) bool { return u.Name == name })
	if i < 0 {
		return Unit{}, false, nil
	}
	return units[i], true, nil
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	units, err := s.units()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, units)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	u, ok, err := s.unit(r.PathValue("unit"))
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Errorf("unit %s not found", r.PathValue("unit")))
	default:
		writeJSON(w, http.StatusOK, u)
	}
}

// operate does what systemctl's verb does to a kubelet unit: start and stop are no-ops on a unit
// already so; kill is stop (the unit has no restart policy, as the transient unit upstream's
// node e2e runs the kubelet in); restart stops a running kubelet and starts it; reset-failed has
// nothing to reset.
func (s *Server) operate(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if !slices.Contains(Ops, op) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("unknown operation %q: one of %s", op, strings.Join(Ops, ", ")))
		return
	}
	u, ok, err := s.unit(r.PathValue("unit"))
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Errorf("unit %s not found", r.PathValue("unit")))
		return
	}
	if (op == OpStop || op == OpKill || op == OpRestart) && u.Running() {
		if err := s.kubelets.StopKubelet(u.Node); err != nil {
			writeError(w, http.StatusConflict, err)
			return
		}
		u.Active, u.Sub = "inactive", "dead"
	}
	if (op == OpStart || op == OpRestart) && !u.Running() {
		if err := s.kubelets.StartKubelet(r.Context(), u.Node); err != nil {
			writeError(w, http.StatusConflict, err)
			return
		}
		u.Active, u.Sub = "active", "running"
	}
	writeJSON(w, http.StatusOK, u)
}

// Healthz serves the kubelets' healthz endpoints: node i of nodes on 127.0.0.1:port+i (in
// NodeNames' order, sorted), or with port 0 each on a port the system picks, /healthz answering
// "ok" while its kubelet runs; a stopped kubelet's closes each connection unanswered, as a port
// nothing listens on refuses it. It returns each node's URL. They stop when ctx ends.
func Healthz(ctx context.Context, kubelets Kubelets, port int) (map[string]string, error) {
	nodes := slices.Sorted(slices.Values(kubelets.NodeNames()))
	if port < 0 || port+len(nodes)-1 > 65535 {
		return nil, fmt.Errorf("healthz port %d: the nodes' ports %d..%d are not all ports", port, port, port+len(nodes)-1)
	}
	addrs := map[string]string{}
	var listeners []net.Listener
	for i, node := range nodes {
		p := 0 // the system's pick
		if port != 0 {
			p = port + i
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("the healthz port of node %s: %w", node, err)
		}
		listeners = append(listeners, l)
		addrs[node] = "http://" + l.Addr().String() + "/healthz"
		serve(ctx, l, healthz(kubelets, node))
	}
	return addrs, nil
}

func healthz(kubelets Kubelets, node string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if stopped, err := kubelets.KubeletStopped(node); err == nil && !stopped {
			_, _ = w.Write([]byte("ok")) // the client's going away is not the server's to report
			return
		}
		hangup.Hangup(w, "kubelet stopped")
	})
	return mux
}

// serve serves h on l until ctx ends; the channel reports the server's end.
func serve(ctx context.Context, l net.Listener, h http.Handler) <-chan error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close() // the listener's end ends Serve, which reports it
	}()
	return done
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client's going away is not the server's to report
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
