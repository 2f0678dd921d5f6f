// Package clockctx gives contexts whose timeouts run on a component's clock, so that a
// component tested on a fake clock times out when the test steps the clock, not when the wall
// clock says (context.WithTimeout reads the wall clock).
//
// It owns nothing else: a context's one goroutine waits for its timer and ends with the
// context; nothing is kept outside the contexts it returns.
package clockctx
