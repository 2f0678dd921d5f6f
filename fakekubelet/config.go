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

// setKubeletConfig records what the node's kubelet took from its configuration as it started.
func (k *Kubelet) setKubeletConfig(node string, s kubeletconfig.Settings) {
	k.configMu.Lock()
	defer k.configMu.Unlock()
	k.configs[node] = s
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
