# operador-promociones. `make help` lists the targets.

IMG ?= registry.iximiuz.com/tienda/operador-promociones:v1
GO ?= go
# kubectl on your PATH; `make cluster` and `make dev` use the one they built, bin/kubectl.
KUBECTL ?= kubectl
CLUSTER_KUBECONFIG := $(CURDIR)/.cluster/kubeconfig

.DEFAULT_GOAL := help
.PHONY: help build run install uninstall deploy undeploy docker-build docker-push fmt vet test e2e bench chaos k8s-binaries cluster cluster-down dev

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the operator into bin/operador-promociones.
	$(GO) build -o bin/operador-promociones .

run: ## Run the operator against the current kubeconfig (go run .).
	$(GO) run .

install: ## Install the Promocion CRD into the current cluster.
	$(KUBECTL) apply -f manifiestos/crd.yaml

uninstall: ## Remove the Promocion CRD (and with it every Promocion).
	$(KUBECTL) delete --ignore-not-found -f manifiestos/crd.yaml

deploy: ## Apply manifiestos/: CRD, ServiceAccount, RBAC and the operator's Deployment.
	$(KUBECTL) apply -f manifiestos/

undeploy: ## Delete what deploy applied.
	$(KUBECTL) delete --ignore-not-found -f manifiestos/

docker-build: ## Build the image IMG (needs a Docker engine).
	docker build -t $(IMG) .

docker-push: ## Push the image IMG to its registry.
	docker push $(IMG)

fmt: ## Format the Go code.
	gofmt -w .

vet: ## Run go vet, and check that the code is formatted.
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "not formatted, run make fmt: $$unformatted"; exit 1; fi
	$(GO) vet ./...

k8s-binaries: ## Build etcd and the Kubernetes binaries (once; cached outside the checkout), and link bin/kubectl.
	@mkdir -p bin && ln -sf "$$(hack/k8s-binaries.sh)/kubectl" bin/kubectl

cluster: k8s-binaries ## Start a local control plane with kwok nodes in the background (.cluster/).
	@hack/cluster.sh up

cluster-down: ## Stop the local cluster and remove its state.
	@hack/cluster.sh down

dev: cluster ## The lesson on the local cluster: CRD, rebajas-verano, and the operator in the foreground.
	bin/kubectl --kubeconfig $(CLUSTER_KUBECONFIG) apply -f manifiestos/crd.yaml
	bin/kubectl --kubeconfig $(CLUSTER_KUBECONFIG) wait --for=condition=Established --timeout=60s crd/promociones.tienda.example.com
	bin/kubectl --kubeconfig $(CLUSTER_KUBECONFIG) apply -f manifiestos/ejemplos/rebajas-verano.yaml
	@echo "In another terminal: export KUBECONFIG=$(CLUSTER_KUBECONFIG); bin/kubectl get promociones"
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(GO) run .

test: vet k8s-binaries ## Run every test: unit, integration against a real API server, and the lesson end to end.
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test -count=1 -timeout 30m .
	$(MAKE) e2e

e2e: k8s-binaries ## The lesson's walk-through, Steps 1 to 9, the production tests and short chaos and benchmark runs, on a cluster of their own.
	$(GO) test -count=1 -timeout 20m -v ./e2e/

bench: k8s-binaries ## Benchmarks at full scale (about 50 minutes); prints a Markdown table, also in bench-results.md.
	BENCH_SCALE=full BENCH_OUT=$(CURDIR)/bench-results.md $(GO) test -count=1 -timeout 90m -v -run 'TestBench$$' ./e2e/

chaos: k8s-binaries ## The chaos suite at full scale (about 15 minutes); prints a Markdown table, also in chaos-results.md.
	CHAOS_SCALE=full CHAOS_OUT=$(CURDIR)/chaos-results.md $(GO) test -count=1 -timeout 90m -v -run 'TestChaos$$' ./e2e/
