package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// HTTPGet sends a GET for path to what the pod serves on port and returns the status code; an
// error means nothing answers there (connection refused).
func (r *Runtime) HTTPGet(ctx context.Context, uid types.UID, port int32, path string, header http.Header) (int, error) {
	r.mu.Lock()
	h := r.handler(uid, port)
	var ip string
	if sb := r.pods[uid]; sb != nil {
		ip = sb.ip
	}
	r.mu.Unlock()
	if h == nil {
		return 0, fmt.Errorf("dial tcp %s:%d: connect: connection refused", ip, port)
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
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

// Listening reports whether some container of the pod serves port (a tcpSocket probe).
func (r *Runtime) Listening(uid types.UID, port int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handler(uid, port) != nil
}
