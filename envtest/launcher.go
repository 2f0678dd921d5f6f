package envtest

import (
	"runtime"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// launcher starts and stops the control plane from one goroutine locked to its OS thread. The
// guard around each binary asks the kernel to kill it when its parent thread ends, so that
// thread must live exactly as long as the control plane: a Go thread otherwise may end at any
// time once no goroutine is locked to it.
type launcher struct {
	requests chan func()
	done     chan struct{}
}

func newLauncher() *launcher {
	l := &launcher{requests: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer close(l.done)
		for f := range l.requests {
			f()
		}
		runtime.UnlockOSThread()
	}()
	return l
}

func (l *launcher) start(env *crenvtest.Environment) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	l.do(func() { cfg, err = env.Start() })
	return cfg, err
}

// stop stops the control plane on the launcher's thread, then lets the thread go.
func (l *launcher) stop(env *crenvtest.Environment) error {
	var err error
	l.do(func() { err = env.Stop() })
	close(l.requests)
	<-l.done
	return err
}

func (l *launcher) do(f func()) {
	ran := make(chan struct{})
	l.requests <- func() { defer close(ran); f() }
	<-ran
}
