// Package knownimages is what the container images restartbed knows hold: each one's entrypoint
// and default command, as its image configuration says them (Config), and the executables it
// holds beyond the shell and its utilities (shell.Commands): upstream's e2e image agnhost with
// its subcommands, the pause image, nginx and httpd. Argv builds a container's process from its
// command, its args and its image's configuration, as the container runtime does.
//
// It pulls nothing (package images says whether an image can be had), chooses no program by rule
// (package program's rules come first) and starts nothing (package runtime runs what Argv says).
// An image it does not know has no entrypoint or default command of its own here.
package knownimages
