package clockctx

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/restartbed/restartbed/internal/clocktest"
)

func TestWithTimeoutRunsOnTheClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	ctx, cancel := WithTimeout(context.Background(), clk, 2*time.Second)
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
}

func TestWithTimeoutCancel(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
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
}

func TestWithTimeoutParent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := WithTimeout(parent, clk, time.Hour)
	defer cancel()
	stop()
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("after the parent's cancel: Err() = %v, want context.Canceled", err)
	}
}
