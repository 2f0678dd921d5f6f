package runtime

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/restartbed/restartbed/fakekubelet/network"
)

// HTTPGet sends a GET for path to what the pod serves on port and returns the status code; an
// error means nothing answers there (connection refused). A program's handler is called
// directly; anything else listening on the pod's address (a script's nc) gets a real request
// over the pod network.
func (r *Runtime) HTTPGet(ctx context.Context, uid types.UID, port int32, path string, header http.Header) (int, error) {
	r.mu.Lock()
	h := r.handler(uid, port)
	var ip string
	var iface *network.Interface
	if sb := r.pods[uid]; sb != nil {
		ip, iface = sb.ip, sb.iface
	}
	r.mu.Unlock()
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if h == nil && iface != nil && validPort(port) && iface.Listening(uint16(port)) {
		return httpOver(ctx, iface, net.JoinHostPort(ip, fmt.Sprint(port)), path, header, r.opts.ProbeUserAgent)
	}
	if h == nil {
		return 0, fmt.Errorf("dial tcp %s:%d: connect: connection refused", ip, port)
	}
	req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", r.opts.ProbeUserAgent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, nil
}

// httpOver sends one GET over the pod network.
func httpOver(ctx context.Context, iface *network.Interface, addr, path string, header http.Header, userAgent string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	maps.Copy(req.Header, header)
	req.Header.Set("User-Agent", userAgent)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return iface.Dial(ctx, addr) }},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close() // the probe has its answer
	return resp.StatusCode, nil
}

// Listening reports whether a tcpSocket probe of port connects: a program serves it, or
// something listens on the pod's address there, in which case the probe opens a connection and
// closes it, as the kubelet's does.
func (r *Runtime) Listening(uid types.UID, port int32) bool {
	r.mu.Lock()
	served := r.handler(uid, port) != nil
	var iface *network.Interface
	var ip string
	if sb := r.pods[uid]; sb != nil {
		ip, iface = sb.ip, sb.iface
	}
	r.mu.Unlock()
	if served || iface == nil || !validPort(port) {
		return served
	}
	c, err := iface.Dial(context.Background(), net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		return false
	}
	_ = c.Close() // the probe has its answer
	return true
}

// Serves reports whether a connection to port would be taken: a program serves it, or something
// listens on the pod's address there. Unlike Listening, it opens no connection.
func (r *Runtime) Serves(uid types.UID, port int32) bool {
	r.mu.Lock()
	served := r.handler(uid, port) != nil
	var iface *network.Interface
	if sb := r.pods[uid]; sb != nil {
		iface = sb.iface
	}
	r.mu.Unlock()
	return served || (iface != nil && validPort(port) && iface.Listening(uint16(port)))
}

func validPort(p int32) bool { return p > 0 && p < 1<<16 }
