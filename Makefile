# operador-promociones. `make help` lists the targets.

IMG ?= registry.iximiuz.com/tienda/operador-promociones:v1
# make image builds these; make dev only this machine's.
PLATFORMS ?= linux/amd64,linux/arm64
GO ?= go
# Every Go build of the targets below, the tests' included, as the tools
# (hack/lib.sh) and the image are built: static and with trimmed paths. Go's
# build cache then compiles each package once for all of them where the
# versions agree (the operator's go.mod has the tools' versions of client-go
# and the rest): on a fresh machine, go vet compiled 884 packages with cgo and
# full paths, where after the tools' builds it compiles 55.
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath
# kubectl on your PATH; `make cluster` and `make dev` use the one they built, bin/kubectl.
KUBECTL ?= kubectl
# The local cluster's folder (and CLUSTER_PORT its API server's port, 16443): hack/cluster.sh reads both.
CLUSTER_DIR ?= $(CURDIR)/.cluster
export CLUSTER_DIR
CLUSTER_KUBECONFIG = $(CLUSTER_DIR)/kubeconfig
LOCAL_KUBECTL = bin/kubectl --kubeconfig $(CLUSTER_KUBECONFIG)

.DEFAULT_GOAL := help
.PHONY: dev-on-host dev-in-cluster leccion
.PHONY: help build run install uninstall build-installer chart chart-push deploy undeploy image push docker-build docker-push fmt vet lint deps test-unit test tools e2e bench bench-scale bench-ablation bench-writes bench-report chaos k8s-binaries cluster cluster-down dev

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the operator into bin/operador-promociones.
	$(GO) build -o bin/operador-promociones .

run: ## Run the operator against the current kubeconfig (go run .).
	$(GO) run .

install: ## Install the Promocion API: the CRD, its guard against deletion by accident, and the users' roles.
	PART=api hack/installer.sh $(IMG) - $(KUBECTL) | $(KUBECTL) apply -f -

uninstall: ## Delete the Promocion API, and with it every Promocion and every shop: it says what will go and asks (CONFIRM=yes in a script).
	@hack/uninstall.sh $(KUBECTL)

INSTALLER ?= dist/install.yaml
# Confine the operator to these namespaces (NAMESPACES=tienda,outlet): it
# watches and may write only there. Empty: every namespace.
NAMESPACES ?=
# The web pods' image, instead of deploy.yaml's.
WEB_IMAGE ?=
INSTALLER_ENV = NAMESPACES='$(NAMESPACES)' WEB_IMAGE='$(WEB_IMAGE)'

build-installer: ## Write dist/install.yaml: manifiestos/ in one file, with the operator's image set to IMG (and NAMESPACES, WEB_IMAGE).
	$(INSTALLER_ENV) hack/installer.sh $(IMG) $(INSTALLER) $(KUBECTL)

chart: ## Write the Helm chart charts/operador-promociones from manifiestos/ again (its CRD, templates and values.yaml): run it after changing manifiestos/.
	$(GO) -C hack/chart run . -root $(CURDIR)

# Where make chart-push sends the chart: an OCI repository. HELM_FLAGS adds
# helm push's flags (--plain-http for a registry without TLS, --ca-file...).
CHART_REPO ?= oci://registry.iximiuz.com/tienda/charts
HELM_FLAGS ?=
# Where the packaged chart is written.
CHART_DIST ?= bin

chart-push: ## Package the chart into CHART_DIST (bin/) and push it to CHART_REPO (after helm registry login, if the registry asks).
	@mkdir -p $(CHART_DIST)
	helm=$$(hack/helm.sh) && pkg=$$($$helm package charts/operador-promociones -d $(CHART_DIST) | sed -n 's/^Successfully packaged chart and saved it to: //p') && \
		test -n "$$pkg" && $$helm push "$$pkg" $(CHART_REPO) $(HELM_FLAGS)

deploy: build-installer ## Apply dist/install.yaml: the API (make install's) and the operator in its namespace operador-promociones-system, with the image IMG; an operator in default moves there.
	@NAMESPACES='$(NAMESPACES)' hack/deploy.sh $(INSTALLER) $(KUBECTL)

undeploy: ## Remove the operator, from its namespace and from default, and keep the API: the CRD, the Promociones and their shops stay, serving.
	@hack/undeploy.sh $(KUBECTL)

image: ## Build the image IMG without Docker, for PLATFORMS, into bin/operador-promociones.tar (docker load, podman load, ctr import, crane push).
	@mkdir -p bin
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(GO) -C hack/image run . operator -repo $(CURDIR) \
		-tag $(IMG) -platforms $(PLATFORMS) -revision $$(git rev-parse HEAD) -o $(CURDIR)/bin/operador-promociones.tar

push: ## Push make image's tarball to the local cluster's registry as IMG (registry.iximiuz.com/...), without Docker.
	hack/cluster.sh push bin/operador-promociones.tar $(IMG)

docker-build: ## Build the image IMG with a Docker engine, from the Dockerfile.
	docker build -t $(IMG) .

docker-push: ## Push the image IMG to its registry.
	docker push $(IMG)

fmt: ## Format the Go code.
	gofmt -w .

vet: ## Run go vet, and check that the code is formatted.
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "not formatted, run make fmt: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) -C hack/image vet ./...
	$(GO) -C hack/chart vet ./...
	$(GO) -C hack/plots vet ./...

lint: ## Run golangci-lint (.golangci.yml) on the operator and hack/image; any finding fails.
	lint=$$(hack/check-tools.sh)/golangci-lint && $$lint run ./... && \
		(cd hack/image && $$lint run --config $(CURDIR)/.golangci.yml ./...) && \
		cd hack/chart && $$lint run --config $(CURDIR)/.golangci.yml ./...

deps: ## Install the Debian packages that the real node and the tests need (iptables, chromium, podman...), if missing.
	@hack/debian-packages.sh node podman chromium

k8s-binaries: ## Build etcd, the Kubernetes binaries and the node's (once; cached outside the checkout), and link bin/kubectl.
	@mkdir -p bin
	@dir=$$(hack/k8s-binaries.sh) && ln -sf "$$dir/kubectl" bin/kubectl
	@# The real nodes' packages and binaries, where they can run (hack/cluster.sh node-support).
	@if [ -z "$$(hack/cluster.sh node-support)" ]; then hack/debian-packages.sh node && hack/node-binaries.sh >/dev/null; fi

cluster: k8s-binaries ## Start the local cluster in the background (.cluster/): control plane, registry, node-01 and node-02, and kwok's nodes.
	@hack/cluster.sh up

cluster-down: ## Stop the local cluster and remove its state.
	@hack/cluster.sh down

dev: cluster ## The lesson for real on the local cluster: the image pushed to its registry, manifiestos/ applied as they are, rebajas-verano serving.
	@if hack/cluster.sh real-nodes; then $(MAKE) --no-print-directory dev-in-cluster; else $(MAKE) --no-print-directory dev-on-host; fi

# Where no real node can run (make cluster said why), the lesson's Step 1:
# the operator on this machine, rebajas-verano's pods on kwok's nodes.
dev-on-host:
	$(LOCAL_KUBECTL) apply -f manifiestos/crd.yaml
	$(LOCAL_KUBECTL) wait --for=condition=Established crd/promociones.tienda.example.com --timeout=60s
	$(LOCAL_KUBECTL) apply -f manifiestos/ejemplos/rebajas-verano.yaml
	@echo "The operator runs here, as in the lesson's Step 1 (Ctrl+C stops it); in another terminal:"
	@echo "  export KUBECONFIG=$(CLUSTER_KUBECONFIG); kubectl get promociones"
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(GO) run .

dev-in-cluster:
	$(MAKE) image PLATFORMS=linux/$$($(GO) env GOARCH)
	$(MAKE) push
	@# Step 4 as the lesson runs it, in its order: the registry's credentials
	@# (the kubelet's own), the identity, the workload, its permissions; then
	@# the rest of manifiestos/. Re-running it is harmless.
	@IFS=: read -r user password <$(CLUSTER_DIR)/registry/credentials && \
		$(LOCAL_KUBECTL) create secret docker-registry registry-credentials --docker-server=registry.iximiuz.com \
		--docker-username="$$user" --docker-password="$$password" --dry-run=client -o yaml | $(LOCAL_KUBECTL) apply -f -
	@running=$$($(LOCAL_KUBECTL) get deployment operador-promociones -o name --ignore-not-found); \
		for f in crd sa deploy rbac; do $(LOCAL_KUBECTL) apply -f manifiestos/$$f.yaml || exit 1; done && \
		$(LOCAL_KUBECTL) apply -f manifiestos/ && \
		if [ -n "$$running" ]; then \
			echo "The tag is the same and the image new: the nodes forget the old one, and the Pods are replaced."; \
			for node in node-01 node-02; do hack/cluster.sh node $$node ctr images rm $(IMG) >/dev/null || true; done; \
			$(LOCAL_KUBECTL) rollout restart deployment/operador-promociones; \
		fi
	$(LOCAL_KUBECTL) rollout status deployment/operador-promociones --timeout=180s
	$(LOCAL_KUBECTL) apply -f manifiestos/ejemplos/rebajas-verano.yaml
	$(LOCAL_KUBECTL) wait --for=condition=Ready promocion/rebajas-verano --timeout=180s
	$(LOCAL_KUBECTL) get promociones,pods -o wide
	@echo "The page, through the Service's ClusterIP, from node-01:"
	@# kube-proxy programs the Service a moment after its pods are Ready; until then it refuses.
	@hack/cluster.sh node curl -sS --retry 30 --retry-delay 1 --retry-connrefused "http://$$($(LOCAL_KUBECTL) get service rebajas-verano -o jsonpath='{.spec.clusterIP}')/"
	@echo
	@echo "export KUBECONFIG=$(CLUSTER_KUBECONFIG)"
	@echo "kubectl logs -l app=operador-promociones -f              # the operator"
	@echo "kubectl port-forward svc/rebajas-verano 8080:80          # then open http://localhost:8080"

test-unit: ## The pure tests alone, with Go alone, in seconds: the edit-and-test loop.
	$(GO) test -count=1 -short .

tools: ## Build every tool make test takes from the cache, side by side (once per machine; later runs find them).
	@hack/first-builds.sh

test: tools vet lint k8s-binaries ## Run every test: unit and integration against a real API server (together, once), the alerts, the image, and the end-to-end suites.
	@# A notice, not a failure: what changed in the product since the committed reports ran.
	@hack/report-age.sh
	@# The tools modules build each shared dependency at one version, so that a fresh machine compiles it once.
	@hack/tools-aligned.sh
	$(GO) test -count=1 ./manifiestos/monitoring/
	$(GO) -C hack/chart test -count=1 ./...
	@# The ablation's variants still apply to the code and compile (seconds; the ablation itself is make bench-ablation).
	$(GO) test -count=1 ./e2e/framework/
	@hack/debian-packages.sh podman
	@# With BenchmarkWriteCost ten writes of each kind, to keep it working (make bench-writes measures).
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test -count=1 -timeout 30m -bench WriteCost -benchtime 10x .
	@# The image's tests beside the end-to-end suites, at the lowest CPU priority: they
	@# cross-compile the operator for arm64, which nothing else builds (five minutes on a
	@# fresh machine), on the cores that the suites, waiting on their clusters, leave idle.
	@# Their podman runs in a mount namespace of its own, so no suite's check of the machine sees it.
	@# Their time runs while the suites take the cores first: 45 minutes, as long as the suites may.
	hack/side-by-side.sh image 'nice -n 19 $(GO) -C hack/image test -count=1 -timeout 45m ./...' e2e '$(MAKE) --no-print-directory e2e'

e2e: k8s-binaries ## The end-to-end suites, each on a cluster of its own: e2e/lesson alone, then e2e/chaos (short) and e2e/bench (small) side by side.
	@hack/debian-packages.sh node chromium
	GO='$(GO)' hack/e2e.sh

leccion: k8s-binaries ## Write docs/leccion.md again: the lesson's Steps 1 to 9 as they run on the local cluster (make test checks it).
	LECCION_WRITE=1 $(GO) test -count=1 -timeout 20m -v -run 'TestLeccion$$' ./e2e/lesson/

bench: k8s-binaries ## Benchmarks at full scale, beside the careful lesson and a plain client (under 90 minutes): writes BENCHMARKS.md's run and bench/ (data, plots).
	mkdir -p bench
	CLUSTER_NODE=none BENCH_SCALE=full BENCH_OUT=$(CURDIR)/bench BENCH_REPORT=$(CURDIR)/BENCHMARKS.md $(GO) test -count=1 -timeout 150m -v -run 'TestBench$$' ./e2e/bench/

bench-scale: k8s-binaries ## The benchmarks' sections apart (about 50 minutes): ours at 10,000 Promociones, and the headline with etcd syncing to disk; joined into make bench's report, each section naming its run.
	CLUSTER_NODE=none BENCH_SCALE=full BENCH_SECTIONS=large,fsync BENCH_OUT=$(CURDIR)/bench BENCH_REPORT=$(CURDIR)/BENCHMARKS.md $(GO) test -count=1 -timeout 150m -v -run 'TestBench$$' ./e2e/bench/

bench-ablation: k8s-binaries ## The ablation (about five hours): each mechanism beyond the careful lesson taken out alone, its chaos scenarios, then 3 interleaved rounds of figures; writes BENCHMARKS.md's ablation and bench/ablation-results.json.
	mkdir -p bench
	CLUSTER_NODE=none hack/ablation-chaos.sh $(CURDIR)/bench
	CLUSTER_NODE=none BENCH_ABLATION=full BENCH_OUT=$(CURDIR)/bench BENCH_REPORT=$(CURDIR)/BENCHMARKS.md $(GO) test -count=1 -timeout 480m -v -run 'TestAblation$$' ./e2e/bench/

bench-writes: k8s-binaries ## What each of the operator's writes costs the API server and etcd in CPU, beside the lesson's (about three minutes, on envtest).
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test -count=1 -timeout 30m -run '^$$' -bench WriteCost -benchtime 3s -count 5 .

bench-report: ## Write BENCHMARKS.md's run, its ablation and the plots in bench/ again from bench/*-results.json (when only their code changed).
	BENCH_RESULTS=$(CURDIR)/bench/bench-results.json BENCH_REPORT=$(CURDIR)/BENCHMARKS.md $(GO) test -count=1 ./e2e/bench/
	BENCH_RESULTS=$(CURDIR)/bench/ablation-results.json BENCH_REPORT=$(CURDIR)/BENCHMARKS.md $(GO) test -count=1 ./e2e/bench/
	$(GO) -C hack/plots run . $(CURDIR)/bench

chaos: k8s-binaries ## The chaos suite at full scale, its mutants and its mutant-scenario pairs over three seeds (about two hours); writes RELIABILITY.md's tables.
	CLUSTER_NODE=none CHAOS_SCALE=full CHAOS_OUT=$(CURDIR)/RELIABILITY.md $(GO) test -count=1 -timeout 180m -v -run 'TestChaos$$|TestMutants$$|TestMutantPairs$$' ./e2e/chaos/
