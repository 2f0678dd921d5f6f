package clockctx

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// WithTimeout returns a copy of parent that is done d after now on clk, or when parent is done,
// or when the returned cancel is called, whichever comes first. Once d has passed, Err reports
// context.DeadlineExceeded, as context.WithTimeout's does. The context reports no Deadline: a
// deadline on a fake clock means nothing to the sockets and the runtime that would read it.
// Call cancel as soon as the work is done, to release the clock's timer.
func WithTimeout(parent context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if af, ok := clk.(clock.WithDelayedExecution); ok {
		// No goroutine waits for the timer: a probe makes one of these a second for every pod.
		// When parent ends first, the timer fires later on a context already done.
		timer := af.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
		return timeoutCtx{ctx}, func() {
			timer.Stop()
			cancel(context.Canceled)
		}
	}
	timer := clk.NewTimer(d)
	go func() {
		select {
		case <-timer.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
			timer.Stop()
		}
	}()
	return timeoutCtx{ctx}, func() { cancel(context.Canceled) }
}

// timeoutCtx reports a timeout as context.DeadlineExceeded rather than context.Canceled.
type timeoutCtx struct{ context.Context }

func (c timeoutCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded { //nolint:errorlint // the cause is the sentinel itself
		return context.DeadlineExceeded
	}
	return err
}
