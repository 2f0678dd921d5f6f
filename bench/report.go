package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// ReadReport reads a report that -o json wrote.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: not a restartbed bench JSON report: %w", path, err)
	}
	if r.Pods == 0 || len(r.Restarts) == 0 && r.Bound.Pods == 0 {
		return nil, fmt.Errorf("%s: not a restartbed bench JSON report (no pods, bound or restarts)", path)
	}
	return &r, nil
}

// CheckOptions reports what is wrong with opts, as Run would, without running anything.
func CheckOptions(opts Options) error { return opts.complete() }

// WriteTable writes the report for people; with previous, each figure is followed by the
// previous report's.
func (r *Report) WriteTable(w io.Writer, previous *Report) {
	fmt.Fprintf(w, "restartbed bench: %d pods on %d nodes (%d Jobs of %d), %s timing, %d CPUs, %s\n",
		r.Pods, r.Nodes, r.Pods/max(r.PodsPerJob, 1), r.PodsPerJob, r.Timing, r.CPUs, r.Go)
	if r.AgentBinary != "" {
		fmt.Fprintf(w, "agents: the host binary %s, one process per pod in a sandbox of its own (docs/host-binaries.md)\n", r.AgentBinary)
	}
	if r.KubeletProcesses > 0 {
		fmt.Fprintf(w, "nodes: in %d restartbed kubelet processes of one shard group; \"restartbed\" below is this process alone (the JobSet controller)\n", r.KubeletProcesses)
	}
	if r.HeartbeatScale > 1 {
		fmt.Fprintf(w, "nodes renewed their Leases every %s, %d× the %s profile's interval, to stay within the heartbeat budget\n",
			r.LeaseRenewInterval, r.HeartbeatScale, r.Timing)
	}
	if previous != nil {
		fmt.Fprintf(w, "compared with a run of %s: %d pods, %s timing (in parentheses)\n",
			previous.StartedAt.Format("2006-01-02 15:04"), previous.Pods, previous.Timing)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	was := func(now, then string) string {
		if previous == nil || then == "" {
			return now
		}
		return now + " (" + then + ")"
	}
	pick := func(f func(*Report) string) string {
		if previous == nil {
			return ""
		}
		return f(previous)
	}
	fmt.Fprintf(tw, "cluster start\t%s\n", was(r.ClusterStart.String(), pick(func(p *Report) string { return p.ClusterStart.String() })))
	fmt.Fprintf(tw, "write bound (%d in flight)\t%s creates/s, %s status patches/s\n", r.Bound.Concurrency,
		was(fmt.Sprintf("%.0f", r.Bound.CreatesPerSecond), pick(func(p *Report) string { return fmt.Sprintf("%.0f", p.Bound.CreatesPerSecond) })),
		was(fmt.Sprintf("%.0f", r.Bound.PatchesPerSecond), pick(func(p *Report) string { return fmt.Sprintf("%.0f", p.Bound.PatchesPerSecond) })))
	if c := r.Bound.CPU; c.Available > 0 {
		fmt.Fprintf(tw, "CPU while bound: %s / available\t%s / %.0fs\n", cpuColumns, c.seconds(), c.Available.Seconds())
	}
	tw.Flush()

	if len(r.Restarts) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		header := []string{""}
		for _, m := range r.Restarts {
			header = append(header, string(m.Strategy))
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		row := func(name string, f func(*Restart) string) {
			cells := []string{name}
			for _, m := range r.Restarts {
				then := ""
				if previous != nil {
					if pm := previous.restart(m.Strategy); pm != nil {
						then = f(pm)
					}
				}
				cells = append(cells, was(f(m), then))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		row("restart: exit → every worker running", func(m *Restart) string { return orDash(m.Restart.Seconds() > 0, m.Restart.String()) })
		row("start: JobSet created → every worker running", func(m *Restart) string { return m.Start.String() })
		row("wall: created → restart's writes settled", func(m *Restart) string { return orDash(m.Wall > 0, m.Wall.String()) })
		row("API writes per pod", func(m *Restart) string { return fmt.Sprintf("%.2f", m.WritesPerPod) })
		row("API writes", func(m *Restart) string { return fmt.Sprint(m.WritesTotal) })
		row("their time at the write bound", func(m *Restart) string { return m.AtBound.String() })
		row("restart / time at the bound", func(m *Restart) string { return orDash(m.OverBound > 0, fmt.Sprintf("%.2f×", m.OverBound)) })
		row("CPU: "+cpuColumns+" / available", func(m *Restart) string {
			return orDash(m.CPU.Available > 0, fmt.Sprintf("%s / %.0fs", m.CPU.seconds(), m.CPU.Available.Seconds()))
		})
		if r.AgentBinary != "" {
			row("host binaries: CPU / processes, their peak RSS", func(m *Restart) string {
				return fmt.Sprintf("%.1fs / %d, %s", m.CPU.HostBinaries.Seconds(), m.HostBinaries.Processes, byteSize(m.HostBinaries.Bytes))
			})
		}
		if r.KubeletProcesses > 0 {
			used := func(m *Restart) bool { return m.CPU.KubeletProcesses > 0 }
			row("kubelet processes: CPU in all", func(m *Restart) string {
				return orDash(used(m), fmt.Sprintf("%.1fs", m.CPU.KubeletProcesses.Seconds()))
			})
			row("kubelet processes: CPU per pod", func(m *Restart) string {
				return orDash(used(m), fmt.Sprintf("%.1fms", m.CPU.KubeletProcesses.Seconds()*1000/float64(max(r.Pods, 1))))
			})
		}
		row("apiserver CPU: the writes at the bound's cost / in all", func(m *Restart) string {
			return orDash(m.WritesCPU > 0, fmt.Sprintf("%.0fs / %.0fs", m.WritesCPU.Seconds(), m.CPU.APIServer.Seconds()))
		})
		row("pods replaced", func(m *Restart) string { return fmt.Sprint(m.Replaced) })
		row("heartbeat writes meanwhile", func(m *Restart) string { return fmt.Sprint(m.Heartbeats) })
		row("429s (APF)", func(m *Restart) string { return fmt.Sprint(sum(m.Throttled)) })
		row("agents started", func(m *Restart) string {
			return agentCell(m, func(a *AgentStats) string { return fmt.Sprint(a.Processes) })
		})
		row("agent start → watch, p50/p90/max", func(m *Restart) string {
			return agentCell(m, func(a *AgentStats) string {
				return fmt.Sprintf("%s/%s/%s", a.ToWatch.P50, a.ToWatch.P90, a.ToWatch.Max)
			})
		})
		row("agents' requests, 429s, Retry-After waits", func(m *Restart) string {
			return agentCell(m, func(a *AgentStats) string { return a.String() })
		})
		row("herd: every agent's watch broken at once → all back", func(m *Restart) string {
			return herdCell(m, func(h *Herd) string {
				return fmt.Sprintf("%d agents, %s", h.Agents, orDash(h.Back > 0, h.Back.String()))
			})
		})
		row("herd: agent back p50/p90/max", func(m *Restart) string {
			return herdCell(m, func(h *Herd) string { return fmt.Sprintf("%s/%s/%s", h.ToWatch.P50, h.ToWatch.P90, h.ToWatch.Max) })
		})
		row("herd: requests, 429s, Retry-After waits", func(m *Restart) string {
			return herdCell(m, func(h *Herd) string { return h.String() })
		})
		row("herd: APF queue wait (mean)", func(m *Restart) string {
			return herdCell(m, func(h *Herd) string {
				var parts []string
				for _, level := range sortedKeys(h.QueueWait) {
					parts = append(parts, level+" "+h.QueueWait[level].String())
				}
				return orDash(len(parts) > 0, strings.Join(parts, ", "))
			})
		})
		tw.Flush()
	}
	if r.RecreateOverInPlace > 0 {
		then := ""
		if previous != nil && previous.RecreateOverInPlace > 0 {
			then = fmt.Sprintf("%.1f×", previous.RecreateOverInPlace)
		}
		fmt.Fprintf(w, "\nrecreate / in place: %s\n", was(fmt.Sprintf("%.1f×", r.RecreateOverInPlace), then))
	}
	fmt.Fprintf(w, "peak RSS: restartbed %s, kube-apiserver %s, etcd %s, kube-controller-manager %s, kube-scheduler %s\n",
		byteSize(r.Memory.Restartbed), byteSize(r.Memory.APIServer), byteSize(r.Memory.Etcd),
		byteSize(r.Memory.ControllerManager), byteSize(r.Memory.Scheduler))
	if r.Memory.HostBinaryProcesses > 0 {
		fmt.Fprintf(w, "peak RSS of the host binaries' %d processes, summed: %s\n", r.Memory.HostBinaryProcesses, byteSize(r.Memory.HostBinaries))
	}
	if r.Memory.KubeletProcesses > 0 {
		fmt.Fprintf(w, "peak RSS of the %d kubelet processes, summed: %s\n", r.KubeletProcesses, byteSize(r.Memory.KubeletProcesses))
	}

	for _, m := range r.Restarts {
		fmt.Fprintf(w, "\n%s: where the time went (from the worker's exit)\n", m.Strategy)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  stage\tfirst pod\tevery pod")
		for _, ms := range m.Milestones {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", ms.Stage, durationCell(ms.First), durationCell(ms.All))
		}
		tw.Flush()
		if len(m.Writes) > 0 {
			fmt.Fprintf(w, "  writes: %s\n", counts(sortedByCount(m.Writes), m.Writes))
		}
		for _, sh := range m.Shards {
			fmt.Fprintf(w, "  %s: %d nodes, CPU %.1fs, peak RSS %s, %d pod watch events\n", sh.Name, sh.Nodes, sh.CPU.Seconds(), byteSize(sh.PeakRSS), sh.PodWatchEvents)
		}
		if len(m.WatchEvents) > 0 {
			var parts []string
			top := sortedByCount(m.WatchEvents)
			for _, res := range top[:min(len(top), 4)] { // the rest are a few bookmarks each; -o json has them all
				parts = append(parts, fmt.Sprintf("%s %d (%s)", res, m.WatchEvents[res], byteSize(m.WatchBytes[res])))
			}
			fmt.Fprintf(w, "  watch events sent (most first): %s\n", strings.Join(parts, ", "))
		}
		if m.Herd != nil && len(m.Herd.Rejected) > 0 {
			fmt.Fprintf(w, "  herd's APF rejections: %s\n", counts(sortedKeys(m.Herd.Rejected), m.Herd.Rejected))
		}
		if len(m.Rejected) > 0 {
			fmt.Fprintf(w, "  APF rejections: %s\n", counts(sortedKeys(m.Rejected), m.Rejected))
		}
	}
	fmt.Fprintf(w, "\nwall: %s\n", r.Wall)
}

// String is the report's cell: requests, 429s, Retry-After waits.
func (s RequestStats) String() string {
	return fmt.Sprintf("%d, %d, %s", s.Requests, s.Throttled, s.RetryAfter)
}

// counts lists m's entries in the order of keys: "key n, key n".
func counts(keys []string, m map[string]int64) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func agentCell(m *Restart, f func(*AgentStats) string) string {
	if m.Agents == nil {
		return "-"
	}
	return f(m.Agents)
}

func herdCell(m *Restart, f func(*Herd) string) string {
	if m.Herd == nil {
		return "-"
	}
	return f(m.Herd)
}

func durationCell(d *Duration) string {
	if d == nil {
		return ""
	}
	return d.String()
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// sortedByCount returns m's keys, most first.
func sortedByCount(m map[string]int64) []string {
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int { return int(m[b] - m[a]) })
	return keys
}

func byteSize(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
}

// cpuColumns names the processes of CPU.seconds, in its order.
const cpuColumns = "restartbed, apiserver, etcd, controller-manager, scheduler"

// seconds is each process's CPU time, in whole seconds, in cpuColumns' order.
func (c CPU) seconds() string {
	return fmt.Sprintf("%.0fs, %.0fs, %.0fs, %.0fs, %.0fs", c.Restartbed.Seconds(), c.APIServer.Seconds(), c.Etcd.Seconds(),
		c.ControllerManager.Seconds(), c.Scheduler.Seconds())
}
