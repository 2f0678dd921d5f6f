package nodectl

import (
	"context"
	"net/http"
)

// This file is the control API's view of the process's own load: how many nodes it runs and
// what the apiserver's pod watches sent it, for a benchmark that measures each kubelet process.

// Watcher is implemented by kubelets that count their pod watch's events (fakekubelet.Kubelet);
// a Server over such kubelets serves GET /v1/stats.
type Watcher interface {
	PodWatch() (events uint64, pods int)
}

// Stats are what GET /v1/stats answers.
type Stats struct {
	// Nodes counts the nodes the process runs now.
	Nodes int `json:"nodes"`
	// PodWatchEvents counts the pod events the process's watches received since it started;
	// PodsWatched is how many pods they hold now.
	PodWatchEvents uint64 `json:"podWatchEvents"`
	PodsWatched    int    `json:"podsWatched"`
}

func (s *Server) serveStats(w Watcher) {
	s.mux.HandleFunc("GET /v1/stats", func(rw http.ResponseWriter, _ *http.Request) {
		events, pods := w.PodWatch()
		writeJSON(rw, http.StatusOK, Stats{Nodes: len(s.kubelets.NodeNames()), PodWatchEvents: events, PodsWatched: pods})
	})
}

// Stats reads the process's stats.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	return st, c.do(ctx, http.MethodGet, "/v1/stats", nil, &st)
}
