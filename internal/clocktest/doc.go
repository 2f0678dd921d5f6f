// Package clocktest helps tests drive components on a fake clock: it waits, with a deadline of
// wall time, until the timers and sleeps a test means to step past are waiting on the clock.
// Only tests import it; it keeps no state.
package clocktest
