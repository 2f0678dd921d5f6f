#!/usr/bin/env bash
# Writes hack/compat/kubernetes-<minor>.mod (and .sum): restartbed's go.mod with every k8s.io
# module it requires, and controller-runtime, moved to a newer supported minor's versions, as the
# module graph of a project on that minor makes them. `make test` runs restartbed's unit tests
# with each (go test -modfile), so the library is known to build and behave on every minor.
# Usage: generate.sh MINOR K8S_VERSION CONTROLLER_RUNTIME_VERSION (e.g. 1.37 v0.37.2 v0.25.1).
set -euo pipefail
cd "$(dirname "$0")/../.."
minor=$1 k8s=$2 cr=$3
mod=hack/compat/kubernetes-$minor.mod
cp go.mod "$mod"
cp go.sum "${mod%.mod}.sum"
# The k8s.io modules go.mod requires at a v0 version (the staging modules), not klog or utils.
mods=$(go mod edit -json | python3 -c 'import json,sys; print(" ".join(r["Path"] for r in json.load(sys.stdin)["Require"] if r["Path"].startswith("k8s.io/") and r["Version"].startswith("v0.") and not r["Version"].startswith("v0.0.")))')
args=()
for m in $mods; do args+=("$m@$k8s"); done
GOFLAGS=-mod=mod go get -modfile="$mod" "${args[@]}" "sigs.k8s.io/controller-runtime@$cr" >/dev/null
GOFLAGS=-mod=mod go mod tidy -modfile="$mod"
echo "$mod: k8s.io $k8s, controller-runtime $cr"
