// Package program decides what an emulated container runs and gives in-process Go programs
// what a process in a container has: its environment (downward API resolved), the pod's
// service-account identity, the component clock, its filesystem, and pod ports to serve on.
//
// A Registry maps containers to programs by container name and image glob; the first matching
// rule wins. Containers no rule matches run their own command through the shell package, or run
// until stopped when they have none. Builtins are programs known by name, handed to NewRegistry
// and Rule.Problems by whoever builds the kubelet (package builtins holds restartbed's, among them
// JobSet's agent as "agent"), so that scenarios can refer to them. The package keeps no global
// state: nothing registers itself.
package program

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/restartbed/restartbed/fakekubelet/vfs"
	"github.com/restartbed/restartbed/internal/imageglob"
)

// Program is an in-process container program. Run's context is cancelled when the container is
// sent SIGTERM; a program that has not returned when the grace period ends is reported as killed
// (exit 137), and must still return soon after, because Stop waits for it. The return value is
// the exit code.
type Program interface {
	Run(ctx context.Context, c *Container) int
}

// Func adapts a function to a Program.
type Func func(ctx context.Context, c *Container) int

// Run calls f.
func (f Func) Run(ctx context.Context, c *Container) int { return f(ctx, c) }

// Container is what a program sees of its container.
type Container struct {
	// Pod is the pod as the kubelet saw it when it started the container.
	Pod *corev1.Pod
	// Spec is the container's spec.
	Spec *corev1.Container
	// Env is the resolved environment, downward API included, as KEY=VALUE in spec order.
	Env []string
	// Config reaches the apiserver as the pod's service account.
	Config *rest.Config
	// Clock is the component clock.
	Clock clock.Clock
	// FS is the container's filesystem, with the pod's volumes mounted.
	FS *vfs.FS
	// Stdout and Stderr are the container's log.
	Stdout, Stderr io.Writer
	// Serve makes h answer HTTP requests to the pod's IP on port (httpGet probes reach it; a
	// tcpSocket probe succeeds while it is served). The registration ends with the container.
	Serve func(port int32, h http.Handler)
}

// Getenv returns the value of the environment variable, or "".
func (c *Container) Getenv(name string) string {
	v, _ := c.LookupEnv(name)
	return v
}

// LookupEnv returns the value of the environment variable and whether it is set; as in a
// process, the last definition wins.
func (c *Container) LookupEnv(name string) (string, bool) {
	for i := len(c.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(c.Env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Rule assigns a program to the containers it matches. With both Container and Image set, both
// must match; a rule with neither matches every container.
type Rule struct {
	// Container is a container name.
	Container string
	// Image is a glob over the container's whole image reference: * matches any run of
	// characters, slashes included ("*agent*" matches registry.k8s.io/jobset/agent:v0.12),
	// ? one character, [abc] and [!abc] a class.
	Image string
	// Builtin names one of the Builtins the registry is given.
	Builtin string
	// Program is an in-process program (instead of Builtin).
	Program Program
	// Script is a shell script run instead of the container's command (instead of a program).
	Script string
	// Binary is a host executable (an absolute path) run as the container's process in a
	// sandbox of its own (package hostproc), standing in for the image's entrypoint: its
	// arguments are the container's command after the first word, then its args. A registry
	// takes such a rule only when host binaries are allowed (NewRegistry), and the kubelet runs
	// it only with a host to run it on.
	Binary string
}

// NamesBinaries reports whether any of the rules names a host binary.
func NamesBinaries(rules []Rule) bool {
	return slices.ContainsFunc(rules, func(r Rule) bool { return r.Binary != "" })
}

// Builtins are programs by name, for rules' Builtin.
type Builtins map[string]Program

// Names lists the builtins' names, sorted.
func (b Builtins) Names() []string { return slices.Sorted(maps.Keys(b)) }

// Problems lists what is wrong with the rule, each starting with the field it concerns (".image: ...")
// or with ": " when it concerns the whole rule; none when it is valid. builtins are the programs
// a Builtin may name.
func (r Rule) Problems(builtins Builtins) []string {
	var problems []string
	set := 0
	for _, b := range []bool{r.Builtin != "", r.Program != nil, r.Script != "", r.Binary != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		problems = append(problems, ": exactly one of builtin, program, run and binary must be set")
	}
	if r.Binary != "" && !path.IsAbs(r.Binary) {
		problems = append(problems, fmt.Sprintf(".binary: %q is not an absolute path", r.Binary))
	}
	if r.Image != "" {
		if _, err := imageglob.Compile(r.Image); err != nil {
			problems = append(problems, fmt.Sprintf(".image: bad glob %q: %v", r.Image, err))
		}
	}
	if r.Builtin != "" {
		if _, ok := builtins[r.Builtin]; !ok {
			problems = append(problems, fmt.Sprintf(".builtin: unknown program %q; known: %s", r.Builtin, strings.Join(builtins.Names(), ", ")))
		}
	}
	return problems
}

// Matches reports whether the rule applies to the container.
func (r Rule) Matches(c *corev1.Container) bool {
	var image *regexp.Regexp
	if r.Image != "" {
		var err error
		if image, err = imageglob.Compile(r.Image); err != nil {
			return false
		}
	}
	return r.matches(c, image)
}

// matches is Matches with the image glob compiled (nil: the rule has none).
func (r Rule) matches(c *corev1.Container, image *regexp.Regexp) bool {
	return (r.Container == "" || r.Container == c.Name) && (image == nil || image.MatchString(c.Image))
}

// Registry is an ordered list of rules.
type Registry struct {
	rules  []Rule
	images []*regexp.Regexp // the rules' compiled image globs; nil where a rule has none
}

// ErrHostBinariesNotAllowed: a rule names a host binary and the run did not allow them.
var ErrHostBinariesNotAllowed = errors.New("host binaries are not allowed in this run (restartbed's --allow-host-binaries, " +
	"or AllowHostBinaries in Go, allows them)")

// NewRegistry checks the rules: each names exactly one of Builtin, Program, Script and Binary,
// images are valid globs, and each Builtin is one of builtins, whose program the rule then runs;
// a Binary only with allowBinaries. Errors name the rule by index.
func NewRegistry(rules []Rule, builtins Builtins, allowBinaries bool) (*Registry, error) {
	var problems []string
	for i, r := range rules {
		for _, problem := range r.Problems(builtins) {
			problems = append(problems, fmt.Sprintf("programs[%d]%s", i, problem))
		}
		if r.Binary != "" && !allowBinaries {
			problems = append(problems, fmt.Sprintf("programs[%d].binary: %v", i, ErrHostBinariesNotAllowed))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	reg := &Registry{rules: slices.Clone(rules), images: make([]*regexp.Regexp, len(rules))}
	for i, r := range reg.rules {
		if r.Builtin != "" {
			reg.rules[i].Program = builtins[r.Builtin]
		}
		if r.Image != "" {
			reg.images[i], _ = imageglob.Compile(r.Image) // Problems above refused a glob that does not compile
		}
	}
	return reg, nil
}

// Choice is what a container runs: a program, a script, a host binary, or (all empty) its own
// command.
type Choice struct {
	Program Program
	Script  string
	Binary  string
}

// Lookup returns what the first matching rule assigns to the container.
func (r *Registry) Lookup(c *corev1.Container) Choice {
	if r == nil {
		return Choice{}
	}
	for i, rule := range r.rules {
		if !rule.matches(c, r.images[i]) {
			continue
		}
		return Choice{Program: rule.Program, Script: rule.Script, Binary: rule.Binary}
	}
	return Choice{}
}

// Claims a projected service-account token bound to a pod carries; the apiserver exposes them to
// admission as request.userInfo.extra.
const (
	ExtraPodName  = "authentication.kubernetes.io/pod-name"
	ExtraPodUID   = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName = "authentication.kubernetes.io/node-name"
)

// PodServiceAccountConfig is ServiceAccountConfig for the pod's own token: its service account
// (default "default") with the pod-bound claims, so that admission policies can tell which pod
// is asking.
func PodServiceAccountConfig(base *rest.Config, pod *corev1.Pod) *rest.Config {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	cfg := ServiceAccountConfig(base, pod.Namespace, sa)
	cfg.Impersonate.Extra = map[string][]string{
		ExtraPodName: {pod.Name}, ExtraPodUID: {string(pod.UID)}, ExtraNodeName: {pod.Spec.NodeName},
	}
	return cfg
}

// ServiceAccountConfig returns a copy of base that acts as the service account namespace/name,
// so that RBAC and admission policies apply to its requests as to a pod's. The apiserver gives an
// impersonated service account the groups a token of it carries (system:serviceaccounts and
// system:serviceaccounts:NAMESPACE), so impersonating needs the right to impersonate service
// accounts and no group (config/kubelet/rbac.yaml). The account need not exist, as with a token.
func ServiceAccountConfig(base *rest.Config, namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(namespace, name)}
	return cfg
}
