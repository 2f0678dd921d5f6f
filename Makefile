# restartbed's build. Every tool comes from hack/tools (one place for versions); each supported
# Kubernetes release's control plane is built from source the first time and cached
# (docs/control-plane.md).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      := $(CURDIR)/bin
TOOLS    := $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod
# Runs a command and prints its wall time and CPU on a "phase NAME: ..." line (hack/ciphases
# turns a log's lines into docs/development.md's table).
PHASE    := $(CURDIR)/hack/phase.sh

# Flags for every `go test` of `make test`; the race detector is on because the emulation is
# concurrent throughout. test/realistic waits out upstream's node-failure delays (about eight
# minutes), hence the longer timeout. `make test GOTEST_FLAGS=` turns it off for a quicker local run.
GOTEST_FLAGS ?= -race
# How many test packages go test runs at once (-p; its default is the cores). The envtest suites
# spend most of their time waiting on their clusters' timers (test/realistic a quarter of a core
# for eight minutes, test/fakekubelet under half a core), so more run than the machine's cores.
TEST_PACKAGES ?= 3
# Packages under test/ hold the envtest suites and their helpers; everything else is a unit test.
UNIT_PKGS = $$($(GO) list ./... | grep -v /test/)
# The supported Kubernetes releases, newest last (the default). make generate writes what
# restartbed knows of each into envtest/controlplane/releases.
KUBERNETES_RELEASES := v1.35.8 v1.36.4 v1.37.2
# Modules that use restartbed as a library, one per supported minor; make test runs each.
EXAMPLES := $(wildcard examples/*/go.mod)
# Modules that run upstream's own test suites against restartbed; make test-upstream runs each.
UPSTREAM := $(wildcard test/upstream/*/go.mod)
# The newer supported minors' libraries (minor:k8s.io version:controller-runtime version):
# hack/compat holds restartbed's go.mod moved to each, and make test runs the unit tests with it.
COMPAT := 1.36:v0.36.4:v0.24.0 1.37:v0.37.2:v0.25.1

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/restartbed.
	$(GO) build -o $(BIN)/restartbed ./cmd/restartbed

.PHONY: run
run: ## The main job: replay KEP-467 Story 1, a JobSet restarting its whole group in place.
	$(GO) run ./cmd/restartbed run scenarios/examples/story1-fast-recovery.yaml

.PHONY: bench
bench: envtest-assets ## restartbed bench at PODS pods (default 1000), both strategies; the figures of docs/performance.md.
	$(GO) run ./cmd/restartbed bench --pods $(or $(PODS),1000) --strategy both

.PHONY: bench-smoke
bench-smoke: envtest-assets ## CI's smoke test of restartbed bench: 100 pods, both strategies; fails only if a restart does not complete.
	$(GO) run ./cmd/restartbed bench --pods 100 --strategy both

# The scenarios make explore sweeps, and its per-scenario budget (0: every schedule).
EXPLORE_SCENARIOS := story1-fast-recovery story2-recreate-then-fail inplace-restart-node-loss
EXPLORE_BUDGET    ?= 0

.PHONY: explore
explore: build envtest-assets ## restartbed explore of Story 1, Story 2 and the node-loss scenario (EXPLORE_BUDGET each, -p 2): the figures of docs/explore.md; violations into explore-violations/.
	@for s in $(EXPLORE_SCENARIOS); do echo "== $$s"; \
		$(BIN)/restartbed explore scenarios/examples/$$s.yaml -p 2 --budget $(EXPLORE_BUDGET) --out explore-violations/$$s \
			--junit explore-violations/$$s.xml || status=1; done; exit $${status:-0}

.PHONY: explore-upstream
explore-upstream: envtest-assets ## The same sweep with upstream JobSet v0.12.0's manager and agent binary (root only; test/upstream/jobset): reports and violations into explore-violations/upstream/.
	cd test/upstream/jobset && $(GO) test -count=1 -timeout 0 -run 'TestExploreUpstream$$' -v . \
		-explore-sweep -explore-budget $(EXPLORE_BUDGET) -explore-out $(CURDIR)/explore-violations/upstream

# KWOK, built from its module into the user cache, for make bench-kwok.
KWOK_VERSION := v0.8.0
KWOK_DIR     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/restartbed/kwok/$(KWOK_VERSION)

.PHONY: bench-kwok
bench-kwok: build envtest-assets ## restartbed kubelet beside KWOK $(KWOK_VERSION) on one control plane: NODES (1000) nodes and pods, created, Running, deleted; KWOKCOMPARE_FLAGS for more (docs/performance.md).
	@test -x $(KWOK_DIR)/kwok || GOBIN=$(KWOK_DIR) $(GO) install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)
	$(GO) run ./hack/kwokcompare --nodes $(or $(NODES),1000) --kwok $(KWOK_DIR)/kwok --restartbed $(BIN)/restartbed \
		--kwok-module $$($(GO) mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) | sed -n 's/.*"Dir": "\(.*\)",/\1/p') $(KWOKCOMPARE_FLAGS)

.PHONY: bench-agent-binary
bench-agent-binary: envtest-assets ## CI's bench with upstream JobSet's agent binary as every pod's agent (100 pods, in place; root only): it must complete.
	cd test/upstream/jobset && $(GO) build -o $(BIN)/in-place-restart-agent sigs.k8s.io/jobset/cmd/in-place-restart-agent
	$(GO) run ./cmd/restartbed bench --pods 100 --strategy inplace --agent-binary $(BIN)/in-place-restart-agent --allow-host-binaries

.PHONY: envtest-assets
envtest-assets: ## Find or build the control plane of every supported release; prints their directories.
	$(GO) run ./cmd/restartbed assets --all

.PHONY: kubectl
kubectl: ## Find or unpack Debian's kubectl (the up test drives it); prints its path.
	@hack/debian-kubectl.sh

.PHONY: test
test: envtest-assets kubectl ## Everything: unit tests, the envtest suites and the library's consumer modules, with the race detector; each step's time on a "phase" line (hack/phase.sh).
	@$(PHASE) test/go-test $(GO) test $(GOTEST_FLAGS) -p $(TEST_PACKAGES) -timeout 30m ./...
	@for m in $(dir $(EXAMPLES)); do echo "== $$m"; (cd $$m && $(PHASE) test/$${m%/} $(GO) test $(GOTEST_FLAGS) ./...) || exit 1; done
	@for m in hack/compat/*.mod; do echo "== unit tests with $$m"; $(PHASE) test/compat-$$(basename $$m .mod) $(GO) test -modfile=$$m $(UNIT_PKGS) || exit 1; done

# The upstream modules run one after another, each line prefixed with its module; the target
# fails if any does. Each loads both cores while its timed specs run (the JobSet suites' clusters,
# the node e2e specs' nine), and beside each other the node e2e specs with a 5 s bound on a pod's
# deletion failed. A module's exit status is caught with || (the shell's -e would end its group
# before it is written down). The summary at the end names every module's status and repeats a
# failing one's failed tests and specs (the harnesses log each as "FAIL <spec>"): a log read
# from its tail still says what failed.
.PHONY: test-upstream
test-upstream: envtest-assets ## Upstream's own suites against restartbed, one module after another: JobSet v0.12.0's e2e and its agent binary in Stories 1 and 2 (both controllers), Kubernetes' node e2e lifecycle specs of every supported release; docs/upstream-tests.md.
	@rcs=$$(mktemp -d); for m in $(dir $(UPSTREAM)); do n=$$(basename $$m); \
		{ rc=0; (cd $$m && $(PHASE) test-upstream/$$n $(GO) test -count=1 -timeout 80m -parallel 9 -v ./...) 2>&1 || rc=$$?; echo $$rc > $$rcs/$$n; } | sed -u "s|^|$$n: |" | tee $$rcs/$$n.log; \
	done; status=0; for m in $(dir $(UPSTREAM)); do n=$$(basename $$m); \
		rc=$$(cat $$rcs/$$n); echo "== $$m: exit status $$rc"; [ "$$rc" = 0 ] && continue; status=1; \
		grep -E -e '--- FAIL' -e '_test\.go:[0-9]+: FAIL ' $$rcs/$$n.log | cut -c1-400 || true; done; rm -rf $$rcs; exit $$status

# Upstream's node e2e specs alone, every release, with what the harness records from a full run
# (test/upstream/kubernetes; docs/upstream-tests.md).
NODE_E2E = cd test/upstream/kubernetes && $(GO) test -count=1 -timeout 80m -parallel 9 -run 'TestNodeE2E$$' -v .

.PHONY: node-e2e-docs
node-e2e-docs: envtest-assets ## Run upstream's node e2e specs of every release and write their outcomes into docs/upstream-tests.md's tables, which the test otherwise checks.
	$(NODE_E2E) -args -update-docs

.PHONY: node-e2e-durations
node-e2e-durations: envtest-assets ## Run upstream's node e2e specs of every release and record each one's duration in test/upstream/kubernetes/testdata/durations.json, by which the harness deals them to its clusters.
	$(NODE_E2E) -args -update-durations

.PHONY: test-unit
test-unit: ## Unit tests only (no control plane).
	$(GO) test $(GOTEST_FLAGS) $(UNIT_PKGS)

.PHONY: generate
generate: ## Regenerate deepcopy code, CRDs and the releases' modules, feature gates and node features.
	$(TOOLS) controller-gen object paths=./api/... crd:crdVersions=v1,generateEmbeddedObjectMeta=true output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/releases $(KUBERNETES_RELEASES)
	@for c in $(COMPAT); do IFS=: read -r minor k8s cr <<< "$$c"; hack/compat/generate.sh "$$minor" "$$k8s" "$$cr" 2>/dev/null; done

.PHONY: lint
lint: ## golangci-lint (pinned in hack/tools; rules in .golangci.yml) on the module and the consumer modules, tests included.
	$(TOOLS) golangci-lint run ./...
	@for m in $(dir $(EXAMPLES) $(UPSTREAM)); do (cd $$m && $(TOOLS) golangci-lint run --config $(CURDIR)/.golangci.yml ./...) || exit 1; done

.PHONY: verify
verify: lint ## Fail on lint findings, unformatted code, vet findings, untidy modules, stale generated files or a tracked build output.
	$(GO) run ./hack/tracked
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd hack/tools && $(GO) mod tidy -diff
	@for m in $(dir $(EXAMPLES) $(UPSTREAM)); do (cd $$m && $(GO) mod tidy -diff && $(GO) vet ./...) || exit 1; done
	@if grep -h -E '^\s*(replace\s+)?k8s\.io/[^ ]+ =>' go.mod $(EXAMPLES) $(UPSTREAM); then \
		echo "a replace of a k8s.io module: the library must build with every supported minor's own modules"; exit 1; fi
	$(MAKE) --no-print-directory generate
	@out=$$(git status --porcelain); if [ -n "$$out" ]; then echo "generated files are stale or untracked (run make generate and commit):"; echo "$$out"; exit 1; fi

.PHONY: clean
clean: ## Remove bin/ and the test cache; the cached control plane stays (restartbed assets shows where).
	rm -rf $(BIN)
	$(GO) clean -testcache
