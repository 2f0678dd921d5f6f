//go:build linux

package procfs

import (
	"os"
	"testing"
	"time"
)

func TestCPUTime(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged this process at least 50 ms more.
	for x := 0; ; x++ {
		now, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 50*time.Millisecond {
			break
		}
		if x > 1e10 {
			t.Fatalf("CPU time stays at %s", now)
		}
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) succeeded, want an error for a process that does not exist")
	}
}

func TestPeakRSS(t *testing.T) {
	// Hold 64 MiB resident, so the peak this process reaches is at least that.
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	peak, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if peak < int64(len(held)) {
		t.Errorf("PeakRSS = %d bytes, want at least the %d this test holds", peak, len(held))
	}
	if held[len(held)-1] != 1 {
		t.Fatal("unreachable: keeps held alive")
	}
	if _, err := PeakRSS(-1); err == nil {
		t.Error("PeakRSS(-1) succeeded, want an error for a process that does not exist")
	}
}
