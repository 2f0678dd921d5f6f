package clocktest

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// Deadline is how long WaitForWaiters waits, in wall time, before it fails the test.
const Deadline = 10 * time.Second

// WaitForWaiters waits until clk has at least n waiters: count them before the step that adds
// the ones the test means (clk.Waiters()), and ask for that many more, so that a waiter the
// test did not mean cannot satisfy it. It fails t, naming what, if they do not come in time.
func WaitForWaiters(t testing.TB, clk *testingclock.FakeClock, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d waiters on the clock after %s, want %d", what, clk.Waiters(), Deadline, n)
		}
		time.Sleep(time.Millisecond)
	}
}
