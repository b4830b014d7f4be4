# operador-promociones. `make help` lists the targets.

IMG ?= registry.iximiuz.com/tienda/operador-promociones:v1
KUBECTL ?= kubectl
GO ?= go

.DEFAULT_GOAL := help
.PHONY: help build run install uninstall deploy undeploy docker-build docker-push fmt vet test k8s-binaries

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

k8s-binaries: ## Build etcd and the Kubernetes binaries the tests use (once; cached outside the checkout).
	@hack/k8s-binaries.sh

test: vet k8s-binaries ## Run every test: unit, and integration against a real API server.
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test -count=1 -timeout 30m ./...
