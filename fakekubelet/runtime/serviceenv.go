package runtime

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serviceEnv is the environment the kubelet derives from Services (pkg/kubelet/kubelet_pods.go
// getServiceEnvVarMap, pkg/kubelet/envvars FromServices): for the default namespace's kubernetes
// Service always, and with links for every Service of the pod's namespace, each with a cluster
// IP: <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT (the first port), <NAME>_SERVICE_PORT_<PORT NAME>
// for named ports, and Docker's link variables <NAME>_PORT, <NAME>_PORT_<port>_<PROTO>[_PROTO,
// _PORT, _ADDR].
func serviceEnv(services []*corev1.Service, namespace string, links bool) map[string]string {
	chosen := map[string]*corev1.Service{}
	for _, svc := range services {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes":
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		case svc.Namespace == namespace && links:
			chosen[svc.Name] = svc
		}
	}
	env := map[string]string{}
	for _, svc := range chosen {
		prefix := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
		ip := svc.Spec.ClusterIP
		env[prefix+"_SERVICE_HOST"] = ip
		env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
		for i, sp := range svc.Spec.Ports {
			port := strconv.Itoa(int(sp.Port))
			if sp.Name != "" {
				env[prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_"))] = port
			}
			proto := string(sp.Protocol)
			if proto == "" {
				proto = string(corev1.ProtocolTCP)
			}
			url := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, port))
			if i == 0 {
				env[prefix+"_PORT"] = url
			}
			p := fmt.Sprintf("%s_PORT_%s_%s", prefix, port, strings.ToUpper(proto))
			env[p] = url
			env[p+"_PROTO"] = strings.ToLower(proto)
			env[p+"_PORT"] = port
			env[p+"_ADDR"] = ip
		}
	}
	return env
}
