package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables the agent reads.
const (
	EnvPodName           = "POD_NAME"
	EnvJobSetName        = "JOBSET_NAME"
	EnvNamespace         = "NAMESPACE"
	EnvExitCode          = "IN_PLACE_RESTART_EXIT_CODE"
	EnvExitCodeDraft     = "RESTART_POD_IN_PLACE_EXIT_CODE" // KEP-467's draft name, accepted as an alias
	EnvWorkerCommand     = "WORKER_COMMAND"
	EnvStartupProbePath  = "STARTUP_PROBE_PATH"
	EnvStartupProbePort  = "STARTUP_PROBE_PORT"
	ServiceAccountNSFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// Defaults of the released agent (JobSet v0.12).
const (
	DefaultExitCode         = 1
	DefaultStartupProbePath = "/barrier-is-down"
	DefaultStartupProbePort = 8081
)

// FieldOwner is the field manager of the agent's server-side apply.
const FieldOwner = "in-place-restart-agent"

// Config is what the agent runs with.
type Config struct {
	PodName    string
	JobSetName string
	Namespace  string
	// ExitCode is the code the agent exits with to ask for an in-place restart.
	ExitCode int
	// WorkerCommand, when set, selects main-container mode: the agent runs it as the worker once
	// the barrier lifts, and exits with its exit code. Otherwise the agent is a sidecar whose
	// startup probe is the barrier.
	WorkerCommand string
	// ProbePath and ProbePort are where the sidecar answers 200 once the barrier is down.
	ProbePath string
	ProbePort int32
}

// Sidecar reports whether the agent runs as a sidecar (no worker command).
func (c Config) Sidecar() bool { return c.WorkerCommand == "" }

// ConfigFromEnv reads the configuration as the released agent does, from lookup (os.LookupEnv in
// a process) and readFile (for the service account's namespace file). Every problem is reported
// at once, each naming the variable, in a *ConfigError.
func ConfigFromEnv(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (Config, error) {
	cfg := Config{ExitCode: DefaultExitCode, ProbePath: DefaultStartupProbePath, ProbePort: DefaultStartupProbePort}
	var problems []string
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }

	if cfg.PodName = get(EnvPodName); cfg.PodName == "" {
		problems = append(problems, EnvPodName+" is required (the downward API's metadata.name)")
	}
	if cfg.JobSetName = get(EnvJobSetName); cfg.JobSetName == "" {
		problems = append(problems, EnvJobSetName+" is required (the downward API's metadata.labels['jobset.sigs.k8s.io/jobset-name'])")
	}
	if data, err := readFile(ServiceAccountNSFile); err == nil && strings.TrimSpace(string(data)) != "" {
		cfg.Namespace = strings.TrimSpace(string(data))
	} else if ns := get(EnvNamespace); ns != "" {
		cfg.Namespace = ns
	} else {
		problems = append(problems, fmt.Sprintf("the namespace is unknown: %s is unreadable (is automountServiceAccountToken off?) and %s is not set",
			ServiceAccountNSFile, EnvNamespace))
	}
	code, name := get(EnvExitCode), EnvExitCode
	if code == "" {
		code, name = get(EnvExitCodeDraft), EnvExitCodeDraft
	}
	if code != "" {
		n, err := strconv.Atoi(code)
		if err != nil || n < 0 || n > 255 {
			problems = append(problems, fmt.Sprintf("%s=%q: must be an exit code from 0 to 255", name, code))
		} else {
			cfg.ExitCode = n
		}
	}
	cfg.WorkerCommand = get(EnvWorkerCommand)
	path, port := get(EnvStartupProbePath), get(EnvStartupProbePort)
	if cfg.WorkerCommand != "" && (path != "" || port != "") {
		problems = append(problems, fmt.Sprintf("%s selects main-container mode, where %s and %s have no meaning; set one mode",
			EnvWorkerCommand, EnvStartupProbePath, EnvStartupProbePort))
	}
	if path != "" {
		if !strings.HasPrefix(path, "/") {
			problems = append(problems, fmt.Sprintf("%s=%q: must start with /", EnvStartupProbePath, path))
		}
		cfg.ProbePath = path
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			problems = append(problems, fmt.Sprintf("%s=%q: must be a port from 1 to 65535", EnvStartupProbePort, port))
		} else {
			cfg.ProbePort = int32(n)
		}
	}
	if len(problems) > 0 {
		return cfg, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// ConfigError lists everything wrong with the agent's environment, each naming its variable.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string { return "agent configuration: " + strings.Join(e.Problems, "; ") }

// OSEnv is ConfigFromEnv's input in a process.
func OSEnv() (func(string) (string, bool), func(string) ([]byte, error)) {
	return os.LookupEnv, os.ReadFile
}
