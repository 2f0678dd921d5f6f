package knownimages

import (
	"slices"

	"github.com/distribution/reference"

	"github.com/restartbed/restartbed/fakekubelet/shell"
)

// Config is what an image's configuration says of its containers' process.
type Config struct {
	// Entrypoint and Cmd are the image's ENTRYPOINT and CMD.
	Entrypoint, Cmd []string
	// Commands are the executables the image holds beyond the shell and its utilities, by name.
	Commands shell.Commands
}

// image is one entry of the catalog: its repositories (normalized, any tag) and configuration.
type image struct {
	repositories []string
	config       Config
}

// catalog is every image restartbed knows. Their shells and utilities are restartbed's shell
// (package shell): busybox's in busybox, alpine and the images built on alpine.
var catalog = []image{
	{[]string{"docker.io/library/busybox", "registry.k8s.io/busybox", "registry.k8s.io/e2e-test-images/busybox",
		"gcr.io/google-containers/busybox", "k8s.gcr.io/busybox", "k8s.gcr.io/e2e-test-images/busybox"},
		Config{Cmd: []string{"sh"}}},
	{[]string{"docker.io/library/alpine"}, Config{Cmd: []string{"/bin/sh"}}},
	{[]string{"docker.io/library/ubuntu"}, Config{Cmd: []string{"/bin/bash"}}},
	{[]string{"docker.io/library/debian"}, Config{Cmd: []string{"bash"}}},
	{[]string{"registry.k8s.io/pause", "k8s.gcr.io/pause", "gcr.io/google-containers/pause", "gcr.io/google_containers/pause"},
		Config{Entrypoint: []string{"/pause"}, Commands: shell.Commands{"pause": pause}}},
	{[]string{"registry.k8s.io/e2e-test-images/agnhost", "k8s.gcr.io/e2e-test-images/agnhost", "gcr.io/kubernetes-e2e-test-images/agnhost"},
		Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Commands: shell.Commands{"agnhost": agnhost}}},
	{[]string{"docker.io/library/nginx", "registry.k8s.io/e2e-test-images/nginx", "k8s.gcr.io/e2e-test-images/nginx"},
		Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"},
			Commands: shell.Commands{"docker-entrypoint.sh": nginxEntrypoint, "nginx": nginx}}},
	{[]string{"docker.io/library/httpd", "registry.k8s.io/e2e-test-images/httpd", "k8s.gcr.io/e2e-test-images/httpd"},
		Config{Cmd: []string{"httpd-foreground"}, Commands: shell.Commands{"httpd-foreground": httpd, "httpd": httpd}}},
}

// Lookup returns the configuration of the image (any tag or digest of a known repository).
func Lookup(name string) (Config, bool) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return Config{}, false
	}
	for _, img := range catalog {
		if slices.Contains(img.repositories, named.Name()) {
			return img.config, true
		}
	}
	return Config{}, false
}

// Argv is the process a container of an image with this configuration runs, as the container
// runtime makes it: the container's command and args when it has a command (the image's
// entrypoint and default command are then ignored); else the image's entrypoint followed by the
// container's args, or by the image's default command when the container has no args.
func (cfg Config) Argv(command, args []string) []string {
	if len(command) > 0 {
		return append(slices.Clone(command), args...)
	}
	if len(args) > 0 {
		return append(slices.Clone(cfg.Entrypoint), args...)
	}
	return append(slices.Clone(cfg.Entrypoint), cfg.Cmd...)
}
