package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/restartbed/restartbed/fakekubelet/runtime"
)

// The streaming protocols restartbed's kubelets speak: exec and attach over SPDY (what the
// apiserver speaks to kubelets, translating its clients' WebSockets), v2 to v4 of the channel
// protocol, and port-forward's. They are served on apimachinery's httpstream, the same in every
// supported release.
var (
	remoteCommandProtocols = []string{remotecommandconsts.StreamProtocolV4Name, remotecommandconsts.StreamProtocolV3Name,
		remotecommandconsts.StreamProtocolV2Name}
	portForwardProtocols = []string{"portforward.k8s.io"}
)

// streamCreationTimeout is how long a client has to open its streams; streamLinger how long a
// command's connection waits for its client to close it once the command has ended.
const (
	streamCreationTimeout = remotecommandconsts.DefaultStreamCreationTimeout
	streamLinger          = 5 * time.Second
)

// commandOptions are an exec's or an attach's query: which streams, and a terminal.
type commandOptions struct {
	stdin, stdout, stderr, tty bool
}

func commandOptionsOf(r *http.Request) (commandOptions, error) {
	flag := func(name string) bool {
		v := r.URL.Query().Get(name)
		b, _ := strconv.ParseBool(v) // what is neither a bool nor "1" is false, as the kubelet reads these flags
		return v == "1" || b
	}
	o := commandOptions{stdin: flag(corev1.ExecStdinParam), stdout: flag(corev1.ExecStdoutParam),
		stderr: flag(corev1.ExecStderrParam), tty: flag(corev1.ExecTTYParam)}
	if o.tty && o.stderr {
		o.stderr = false // a terminal has one output, as the kubelet says
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

type streamAndReply struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// upgrade negotiates one of protocols and upgrades the connection to SPDY; every stream the client
// opens arrives on the channel. nil when the response was already written (a failed handshake).
func upgrade(w http.ResponseWriter, r *http.Request, protocols []string, idle time.Duration) (string, httpstream.Connection, <-chan streamAndReply) {
	protocol, err := httpstream.Handshake(r, w, protocols)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return "", nil, nil
	}
	streams := make(chan streamAndReply, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		streams <- streamAndReply{Stream: s, replySent: replySent}
		return nil
	})
	if conn == nil {
		return "", nil, nil
	}
	conn.SetIdleTimeout(idle)
	return protocol, conn, streams
}

// serveCommand serves exec or attach: it waits for the client's streams, runs the command on them
// and reports its end on the error stream as the kubelet does (v4: a Status with the exit code).
func serveCommand(w http.ResponseWriter, r *http.Request, opts Options, run func(ctx context.Context, s runtime.Streams) (int, error)) {
	want, err := commandOptionsOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	protocol, conn, incoming := upgrade(w, r, remoteCommandProtocols, opts.StreamIdleTimeout)
	if conn == nil {
		return
	}
	defer conn.Close()
	expected := 1 // the error stream
	for _, on := range []bool{want.stdin, want.stdout, want.stderr, want.tty && protocol != remotecommandconsts.StreamProtocolV2Name} {
		if on {
			expected++
		}
	}
	byType := map[string]httpstream.Stream{}
	expire := opts.Clock.NewTimer(streamCreationTimeout)
	defer expire.Stop()
	for len(byType) < expected {
		select {
		case s := <-incoming:
			byType[s.Headers().Get(corev1.StreamType)] = s
			<-s.replySent
		case <-expire.C():
			return
		case <-r.Context().Done():
			return
		}
	}
	errStream := byType[corev1.StreamTypeError]
	if errStream == nil {
		return
	}
	s := runtime.Streams{TTY: want.tty}
	if in := byType[corev1.StreamTypeStdin]; in != nil {
		s.Stdin = in
	}
	if out := byType[corev1.StreamTypeStdout]; out != nil {
		s.Stdout = out
	}
	if out := byType[corev1.StreamTypeStderr]; out != nil {
		s.Stderr = out
	}
	if resize := byType[corev1.StreamTypeResize]; resize != nil {
		go func() { _, _ = io.Copy(io.Discard, resize) }() // restartbed's terminal has no size
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	code, runErr := run(ctx, s)
	status := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case runErr != nil:
		status = metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: fmt.Sprintf("Internal error occurred: error executing command in container: %v", runErr)}
	case code != 0:
		status = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommandconsts.NonZeroExitCodeReason,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommandconsts.ExitCodeCauseType, Message: strconv.Itoa(code)}}},
			Message: fmt.Sprintf("command terminated with non-zero exit code: command terminated with exit code %d", code)}
	}
	writeStatus(errStream, protocol, status)
	// The kubelet closes the connection here. If the client is still writing then (the end of its
	// stdin, often just behind the command's exit), the close resets the TCP connection, and a
	// reset discards whatever output the client — or the apiserver's proxy in between — has not
	// read yet: an interactive session loses its last lines, now and then. So the output and
	// error streams end (the client reads each to its end) and the client closes the
	// connection, as client-go does once it has them; the deferred Close is for a client that
	// does not within streamLinger.
	for _, done := range []httpstream.Stream{byType[corev1.StreamTypeStdout], byType[corev1.StreamTypeStderr], errStream} {
		if done != nil {
			_ = done.Close() // the client may have closed it first
		}
	}
	linger := opts.Clock.NewTimer(streamLinger)
	defer linger.Stop()
	select {
	case <-conn.CloseChan():
	case <-linger.C():
	case <-r.Context().Done():
	}
}

// writeStatus reports the end of a command: v4 as a JSON Status, older protocols as a message
// on failure only.
func writeStatus(w io.Writer, protocol string, status metav1.Status) {
	if protocol == remotecommandconsts.StreamProtocolV4Name {
		if data, err := json.Marshal(status); err == nil {
			_, _ = w.Write(data) // the client may have gone; nothing more to tell it
		}
		return
	}
	if status.Status != metav1.StatusSuccess {
		_, _ = io.WriteString(w, status.Message) // the client may have gone; nothing more to tell it
	}
}

// servePortForward serves port-forward: each request is a pair of streams (error and data) with
// a request ID and a port; the data stream is joined to the port, a failure is written to the
// error stream, as the kubelet's port-forward does.
func servePortForward(w http.ResponseWriter, r *http.Request, idle time.Duration, pod string,
	forward func(ctx context.Context, port int32, stream io.ReadWriteCloser) error) {
	_, conn, incoming := upgrade(w, r, portForwardProtocols, idle)
	if conn == nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type pair struct{ data, errs httpstream.Stream }
	pairs := map[string]*pair{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var s streamAndReply
		select {
		case s = <-incoming:
		case <-conn.CloseChan():
			return
		case <-ctx.Done():
			return
		}
		id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
		p := pairs[id]
		if p == nil {
			p = &pair{}
			pairs[id] = p
		}
		switch s.Headers().Get(corev1.StreamType) {
		case corev1.StreamTypeData:
			p.data = s
		case corev1.StreamTypeError:
			p.errs = s
		default:
			_ = s.Reset() // the stream may already be gone
			continue
		}
		if p.data == nil || p.errs == nil {
			continue
		}
		delete(pairs, id)
		wg.Go(func() {
			defer p.errs.Close()
			defer p.data.Close()
			port, err := strconv.ParseUint(p.data.Headers().Get(corev1.PortHeader), 10, 16)
			if err == nil {
				err = forward(ctx, int32(port), p.data)
			}
			if err != nil {
				fmt.Fprintf(p.errs, "error forwarding port %d to pod %s: %v", port, pod, err)
			}
		})
	}
}
