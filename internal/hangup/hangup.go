// Package hangup answers an HTTP request as a server that is not there would: it closes the
// connection unanswered. It owns only that; it decides nothing about when.
package hangup

import "net/http"

// Hangup closes the request's connection without a response, as close to a refused connection as
// a listener that stays open gets. Where the connection cannot be taken over (HTTP/2) it answers
// 503 with msg.
func Hangup(w http.ResponseWriter, msg string) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close() // nothing to tell the client but the close
			return
		}
	}
	http.Error(w, msg, http.StatusServiceUnavailable)
}
