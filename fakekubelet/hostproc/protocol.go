package hostproc

// This file must import nothing and hold only the protocol's types and constants: HelperSource
// appends it to the helper's source (sandbox_main.go), which uses the same definitions.

// The messages between restartbed and a sandbox's helper (sandbox_main.go, which must match):
// JSON, one per SOCK_SEQPACKET packet, file descriptors as SCM_RIGHTS.
//
//	helper → restartbed  ready (fds: the listeners asked for) | failed{error}
//	restartbed → helper  start{id, init} (fds: stdout, stderr)  → started{id} | failed{id, error}
//	                     exec{id, exec} (fds: stdin, stdout, stderr) → started{id} | failed{id, error}
//	                     signal{id, signal}
//	                     dial{id, port}                         → dialed{id, error} (fd: the connection)
//	helper → restartbed  exited{id, code}

const (
	opReady   = "ready"
	opFailed  = "failed"
	opStart   = "start"
	opExec    = "exec"
	opStarted = "started"
	opSignal  = "signal"
	opDial    = "dial"
	opDialed  = "dialed"
	opExited  = "exited"
)

// helperConfig is the helper's only argument.
type helperConfig struct {
	Hostname string `json:"hostname"`
	// Addrs go on the sandbox's loopback interface, the pod's IP first.
	Addrs []string `json:"addrs"`
	// Base is the directory the helper mounts its tmpfs on.
	Base   string         `json:"base"`
	Listen []helperListen `json:"listen"`
	// DefaultRoute routes every other address through lo, for the redirect (outbound.go).
	DefaultRoute bool `json:"defaultRoute,omitempty"`
}

type helperListen struct {
	Network string `json:"network"` // tcp or udp
	Address string `json:"address"`
}

type message struct {
	Op     string    `json:"op"`
	ID     string    `json:"id,omitempty"`
	Init   *initSpec `json:"init,omitempty"`
	Exec   *execSpec `json:"exec,omitempty"`
	Signal int       `json:"signal,omitempty"`
	Port   int       `json:"port,omitempty"`
	Code   int       `json:"code,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// initSpec is what the helper's init builds and executes for one container.
type initSpec struct {
	// Root is the directory (in the sandbox's tmpfs) for the container's root filesystem.
	Root   string   `json:"root"`
	Binary string   `json:"binary"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	Mounts []Mount  `json:"mounts"`
}

// execSpec is a command to run in a running container (its ID).
type execSpec struct {
	Container string   `json:"container"`
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
}

// Mount is a file or directory of the sandbox's files at a path of the container.
type Mount struct {
	// Source is relative to the sandbox's files directory (Sandbox.FilesDir); in the helper's
	// initSpec, the path in the sandbox.
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}
