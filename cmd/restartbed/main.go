// Command restartbed is the restartbed CLI. It stays thin: flags, signals and exit codes; the
// work is done by the packages it calls.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	var exit exitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		if exit.err != nil {
			fmt.Fprintln(os.Stderr, "restartbed:", exit.err)
		}
		os.Exit(exit.code)
	default:
		fmt.Fprintln(os.Stderr, "restartbed:", err)
		os.Exit(1)
	}
}

// exitError ends the program with a chosen status.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }
