package envtest

import (
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/fakekubelet/hostproc"
	"github.com/restartbed/restartbed/fakekubelet/program"
)

// checkBinaries says, before anything starts, what keeps the rules' host binaries from running:
// a file that is not an executable, or a host that cannot run them (hostproc.Check).
func checkBinaries(rules []program.Rule) error {
	if !program.NamesBinaries(rules) {
		return nil
	}
	var errs []error
	for i, r := range rules {
		if r.Binary == "" {
			continue
		}
		if err := hostproc.CheckBinary(r.Binary); err != nil {
			errs = append(errs, fmt.Errorf("programs[%d].binary: %w", i, err))
		}
	}
	if err := hostproc.Check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startHostBinaries builds the sandbox helper (once, into the cache) and returns the host the
// kubelets run binaries on, forwarding the pods' apiserver connections to the apiserver.
func (c *Cluster) startHostBinaries(assets controlplane.Options) (*hostproc.Host, error) {
	helper, err := controlplane.EnsureTool(assets, hostproc.HelperName, "the pod sandbox helper", hostproc.HelperSource)
	if err != nil {
		return nil, err
	}
	dir := c.work.file("sandboxes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the sandboxes' directory: %w", err)
	}
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("the apiserver's address %q: %w", c.Config.Host, err)
	}
	return hostproc.New(hostproc.Options{Helper: helper, Dir: dir, APIServer: u.Host})
}
