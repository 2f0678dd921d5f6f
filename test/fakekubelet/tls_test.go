package fakekubelet

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/restartbed/restartbed/test/builders"
)

var _ = Describe("TLS from pods", func() {
	It("calls the apiserver's Service over HTTPS with the service account's CA and token, and refuses it without the CA", func(ctx context.Context) {
		ns := newNamespace(ctx)
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		script := `curl -sS --cacert ` + sa + `/ca.crt https://kubernetes.default.svc.cluster.local/healthz; echo
curl -sS --cacert ` + sa + `/ca.crt -H "Authorization: Bearer $(cat ` + sa + `/token)" https://kubernetes.default.svc/api | grep -o '"kind": *"APIVersions"'
curl -sS https://kubernetes.default.svc/healthz; echo "exit $?"`
		pod := builders.MakePod("client", ns).Container(builders.MakeContainer("curl").Shell(script).Obj()).Obj()
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Eventually(func() (string, error) { return cluster.Kubelet.Logs(ns, "client", "curl") }).
			WithTimeout(Timeout).WithPolling(Interval).Should(MatchRegexp(
			`^ok\n"kind": *"APIVersions"\ncurl: \(60\) SSL certificate problem: unable to get local issuer certificate\nexit 60\n$`))
	})
})
