//go:build upstreame2e

package jobset

// The packages upstream's e2e suite imports, so that this module's go.mod and go.sum hold
// everything the copied suite needs (the build tag keeps them out of the build).
import (
	_ "github.com/google/go-cmp/cmp/cmpopts"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "k8s.io/cli-runtime/pkg/printers"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config"
	_ "sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"
	_ "sigs.k8s.io/jobset/pkg/util/testing"
	_ "sigs.k8s.io/jobset/test/util"
)
