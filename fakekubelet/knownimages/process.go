package knownimages

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/restartbed/restartbed/fakekubelet/shell"
)

// logf writes a line to the process's stderr as Go's log package does, timestamped by the
// container's clock.
func logf(inv *shell.Invocation, format string, args ...any) {
	fmt.Fprintf(inv.Env.Stderr, "%s %s\n", inv.Env.Clock.Now().Format("2006/01/02 15:04:05"), fmt.Sprintf(format, args...))
}

// terminated waits for SIGTERM (true) or SIGKILL (false).
func terminated(ctx context.Context, inv *shell.Invocation) bool {
	select {
	case <-inv.Term:
		return true
	case <-ctx.Done():
		return false
	}
}

// serveUntilTerm serves h on port until SIGTERM, then exits with termCode; a server that cannot
// listen reports it with failed and exits 1.
func serveUntilTerm(ctx context.Context, inv *shell.Invocation, port int, h http.Handler, termCode int, failed func(error)) int {
	stop, err := serveHTTP(inv, port, h)
	if err != nil {
		failed(err)
		return 1
	}
	defer stop()
	if !terminated(ctx, inv) {
		return shell.ExitKilled
	}
	return termCode
}

// listen listens on the pod's port.
func listen(inv *shell.Invocation, port int) (net.Listener, error) {
	if inv.Env.Net == nil {
		return nil, errors.New("listen tcp: network is unreachable")
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("listen tcp: address %d: invalid port", port)
	}
	l, err := inv.Env.Net.Listen(uint16(port))
	if err != nil {
		return nil, fmt.Errorf("listen tcp :%d: %w", port, err)
	}
	return l, nil
}

// serveHTTP serves h on the pod's port until stop: other pods, Services and the kubelet's probes
// reach it over the pod network.
func serveHTTP(inv *shell.Invocation, port int, h http.Handler) (stop func(), err error) {
	l, err := listen(inv, port)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }() // returns once stop closes it
	return func() { _ = srv.Close() }, nil
}

// serveTCP answers every connection to the pod's port with reply and closes it, until stop.
func serveTCP(inv *shell.Invocation, port int, reply func(net.Conn)) (stop func(), err error) {
	l, err := listen(inv, port)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			reply(c)
			_ = c.Close() // the reply is written; the client reads until EOF
		}
	}()
	return func() { _ = l.Close() }, nil
}
