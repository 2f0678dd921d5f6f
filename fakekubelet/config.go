package fakekubelet

import (
	"fmt"

	"github.com/restartbed/restartbed/fakekubelet/kubeletconfig"
)

// readKubeletConfig reads Options.KubeletConfigFile as a node's kubelet reads its --config when it
// starts; without a file, the settings are the cluster's defaults.
func (k *Kubelet) readKubeletConfig() (kubeletconfig.Settings, error) {
	if k.opts.KubeletConfigFile == "" {
		return kubeletconfig.Defaults(k.opts.FeatureGates), nil
	}
	s, err := kubeletconfig.Load(k.opts.KubeletConfigFile, k.baseConfigz())
	if err != nil {
		return s, fmt.Errorf("fakekubelet: %w", err)
	}
	return s, nil
}

// startKubeletConfig reads the configuration as the nodes' kubelets start, and records what they
// took; a refused file changes nothing.
func (k *Kubelet) startKubeletConfig(nodes ...string) error {
	s, err := k.readKubeletConfig()
	if err != nil {
		return err
	}
	k.configMu.Lock()
	defer k.configMu.Unlock()
	for _, node := range nodes {
		k.configs[node] = s
	}
	return nil
}

// kubeletConfig is what the node's kubelet took from its configuration at its last start.
func (k *Kubelet) kubeletConfig(node string) kubeletconfig.Settings {
	k.configMu.Lock()
	defer k.configMu.Unlock()
	if s, ok := k.configs[node]; ok {
		return s
	}
	return kubeletconfig.Defaults(k.opts.FeatureGates)
}
