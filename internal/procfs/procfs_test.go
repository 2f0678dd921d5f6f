//go:build linux

package procfs

import (
	"os"
	"testing"
)

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
