//go:build linux

package procfs

import (
	"time"

	"github.com/prometheus/procfs"
)

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every Linux architecture Go
// supports (prometheus/procfs's ProcStat.CPUTime divides by the same).
const userHZ = 100

// stat reads /proc/PID/stat; it fails when the process is gone.
func stat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}

// Command returns the process's command name, or "" if it is gone.
func Command(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	comm, err := p.Comm()
	if err != nil {
		return ""
	}
	return comm
}

// Executable returns the path of the binary the process runs, symbolic links resolved, or "" if
// it is gone.
func Executable(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	exe, err := p.Executable()
	if err != nil {
		return ""
	}
	return exe
}

// CommandLine returns the process's arguments, the first its name, or nil if it is gone.
func CommandLine(pid int) []string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil
	}
	args, err := p.CmdLine()
	if err != nil {
		return nil
	}
	return args
}

// Alive reports whether pid runs; a zombie (dead, not yet reaped) does not count.
func Alive(pid int) bool {
	s, err := stat(pid)
	return err == nil && s.State != "Z" && s.State != "X"
}

// Children lists the pids whose parent is ppid.
func Children(ppid int) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil // no /proc to read: no children to report
	}
	var pids []int
	for _, p := range procs {
		if s, err := p.Stat(); err == nil && s.PPID == ppid {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// ticks is a number of USER_HZ clock ticks as a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// CPUTime returns the CPU time the process has used so far, user and system.
func CPUTime(pid int) (time.Duration, error) {
	s, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return ticks(int64(s.UTime) + int64(s.STime)), nil
}

// CPUTimeWithChildren returns the CPU time of the process and of its children it has waited for
// (utime, stime, cutime, cstime), as the process's share of a tree whose members come and go.
func CPUTimeWithChildren(pid int) (time.Duration, error) {
	s, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return ticks(int64(s.UTime) + int64(s.STime) + int64(s.CUTime) + int64(s.CSTime)), nil
}

// PeakRSS returns the most memory the process has held resident (VmHWM), in bytes.
func PeakRSS(pid int) (int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	s, err := p.NewStatus()
	if err != nil {
		return 0, err
	}
	return int64(s.VmHWM), nil
}
