package clockctx

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/internal/clocktest"
)

func TestWithTimeoutRunsOnTheClock(t *testing.T) {
	forEachClock(t, func(t *testing.T, clk *testingclock.FakeClock, c clock.Clock) {
		ctx, cancel := WithTimeout(context.Background(), c, 2*time.Second)
		defer cancel()
		if _, ok := ctx.Deadline(); ok {
			t.Error("the context reports a deadline; want none")
		}
		clocktest.WaitForWaiters(t, clk, 1, "the context's timer")
		clk.Step(1999 * time.Millisecond)
		if err := ctx.Err(); err != nil {
			t.Fatalf("before the timeout on the clock: Err() = %v, want nil", err)
		}
		clk.Step(time.Millisecond)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the context is not done once the clock reached the timeout")
		}
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err() = %v, want context.DeadlineExceeded", err)
		}
		if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Cause = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestWithTimeoutCancel(t *testing.T) {
	forEachClock(t, func(t *testing.T, clk *testingclock.FakeClock, c clock.Clock) {
		ctx, cancel := WithTimeout(context.Background(), c, time.Second)
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel: Err() = %v, want context.Canceled", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("cancel left the clock's timer waiting")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

func TestWithTimeoutParent(t *testing.T) {
	forEachClock(t, func(t *testing.T, clk *testingclock.FakeClock, c clock.Clock) {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := WithTimeout(parent, c, time.Hour)
		defer cancel()
		stop()
		<-ctx.Done()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("after the parent's cancel: Err() = %v, want context.Canceled", err)
		}
	})
}

// forEachClock runs the test with a fake clock as it is, whose timers can call a function, and
// as a clock that can only make timers to wait on.
func forEachClock(t *testing.T, test func(t *testing.T, clk *testingclock.FakeClock, c clock.Clock)) {
	t.Run("AfterFunc", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Unix(1000, 0))
		test(t, clk, clk)
	})
	t.Run("NewTimer", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Unix(1000, 0))
		test(t, clk, timersOnly{clk})
	})
}

// timersOnly hides the clock's AfterFunc.
type timersOnly struct{ clock.Clock }
