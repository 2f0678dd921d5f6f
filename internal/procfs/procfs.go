//go:build linux

package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stat returns the fields of /proc/PID/stat after the command name: state first, then ppid.
func stat(pid int) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(data)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// Command returns the process's command name, or "" if it is gone.
func Command(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// Alive reports whether pid runs; a zombie (dead, not yet reaped) does not count.
func Alive(pid int) bool {
	f := stat(pid)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// Children lists the pids whose parent is ppid.
func Children(ppid int) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*") // only a malformed pattern fails, and this one is constant
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if f := stat(pid); len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// clockTicks is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// CPUTime returns the CPU time the process has used so far, user and system.
func CPUTime(pid int) (time.Duration, error) {
	f := stat(pid)
	// After the command: state(0) ppid ... utime(11) stime(12), as proc(5) numbers them from 3.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: no CPU times", pid)
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// PeakRSS returns the most memory the process has held resident (VmHWM), in bytes.
func PeakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM line", pid)
}

// CPUTimeWithChildren returns the CPU time of the process and of its children it has waited for
// (utime, stime, cutime, cstime), as the process's share of a tree whose members come and go.
func CPUTimeWithChildren(pid int) (time.Duration, error) {
	f := stat(pid)
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: no CPU times", pid)
	}
	var ticks int64
	for _, field := range f[11:15] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
