# sluice — `make` lists the targets.
GO      ?= go
BIN     ?= bin/sluice
ADDR    ?= 127.0.0.1:6379
DATA    ?= ./data
PORT    ?= 7001
PORTS   ?=
GROUPS  ?= 1
HTTP    ?=

# The generated vtproto marshalers of Envoy's messages (the gRPC door's
# codec) are behind this build tag; every go command make runs, and those
# the tests run, build with it.
export GOFLAGS := -tags=vtprotobuf $(GOFLAGS)

.DEFAULT_GOAL := help
.PHONY: help build run cluster cluster-stop provision test test-go test-node robustness check-dashboards check-rls check-deploy image bench fmt lint proto

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's|$$(ADDR)|$(ADDR)|g' -e 's|$$(DATA)|$(DATA)|g' -e 's|$$(PORT)|$(PORT)|g' \
		| awk -F':.*## ' '{printf "  make %-17s %s\n", $$1, $$2}'

build: ## build bin/sluice
	$(GO) build -o $(BIN) ./cmd/sluice

run: build ## run one node on $(ADDR) with data in $(DATA) (HTTP=host:port: status page and metrics there; RULES=path: rule files, a file or a directory)
	./$(BIN) --addr $(ADDR) --data-dir $(DATA) $(if $(HTTP),--http-addr $(HTTP)) $(if $(RULES),--rules $(RULES))

cluster: build ## run a local three-node cluster on 127.0.0.1:$(PORT) and the next two ports, or on PORTS="a b c"; GROUPS=n: n groups of three on the next 3n ports; HTTP=1, GRPC=1: the doors on port+20000, port+22000; RULES=path (data in $(DATA)/cluster)
	SLUICE_GROUPS=$(GROUPS) HTTP=$(HTTP) GRPC=$(GRPC) RULES=$(RULES) ./scripts/cluster.sh start $(BIN) "$(or $(PORTS),$(PORT))" $(DATA)/cluster

cluster-add-group: build ## add a group of three to the sharded cluster make cluster GROUPS=n started (same PORT= and DATA=), on its next three ports; it owns no slots until some move to it
	HTTP=$(HTTP) GRPC=$(GRPC) RULES=$(RULES) ./scripts/cluster.sh add-group $(BIN) $(PORT) $(DATA)/cluster

cluster-stop: ## stop the cluster make cluster started (give the same DATA=)
	./scripts/cluster.sh stop $(DATA)/cluster

provision: ## install what the tests need (redis-cli, redis-py, Node.js) unless present
	./scripts/provision.sh

test: provision lint test-go test-node ## install what is missing, vet, then every test (unit, fuzz seeds, end-to-end, ioredis)

# -count=1: the end-to-end tests build bin/sluice themselves, which Go's test
# cache does not see, so a cached pass could hide a change to the server.
test-go:
	$(GO) test -race -count=1 -timeout 10m ./...

test-raft: ## hashicorp/raft's own test suite on the in-tree patched copy (third_party/hashicorp-raft, PATCHES.md)
	GO=$(GO) ./scripts/test_raft.sh

test-node: build ## ioredis against bin/sluice (needs Node.js >= 20 and npm)
	@test -d tests/node/node_modules || npm ci --prefix tests/node --no-audit --no-fund
	cd tests/node && SLUICE_BIN=$(CURDIR)/$(BIN) node --test

ROBUST_RACE = $(or $(RACE),$(if $(LONG),0,1))
robustness: ## histories under faults checked by the limiter's model (porcupine): a short run; SEED=n to repeat one, SCENARIO=one-node|group-of-three|sharded|rolling-upgrade, DURATION=20s a scenario (LONG=1: 30m, members built without -race unless RACE=1)
	SLUICE_ROBUSTNESS=1 SLUICE_ROBUSTNESS_SEED=$(SEED) SLUICE_ROBUSTNESS_SCENARIO=$(SCENARIO) \
		SLUICE_ROBUSTNESS_RACE=$(ROBUST_RACE) \
		SLUICE_ROBUSTNESS_DURATION=$(or $(DURATION),$(if $(LONG),30m,20s)) \
		$(GO) test $(if $(filter 1,$(ROBUST_RACE)),-race) -count=1 -timeout $(if $(LONG),0,10m) -run '^(TestRobustness|TestPlacementAcrossVersions)$$' -v ./tests/

check-dashboards: ## the Grafana dashboard and alert rules against a real Prometheus (needs Debian's prometheus, root)
	./scripts/check_dashboards.sh

check-rls: ## the rate limit service against envoyproxy/ratelimit built from its module (needs redis-server)
	./scripts/check_rls_reference.sh

image: ## build the container image sluice:<version> (Containerfile) with podman, buildah or docker from a static build
	./scripts/image.sh

check-deploy: ## the image (built, unpacked, run), the Helm chart (lint, template, its pods as processes) and compose.yaml (needs podman; builds helm from its module)
	./scripts/check_deploy.sh

proto: ## regenerate the member messages' Go code (memberpb/member.pb.go) from member.proto
	cd scripts/protogen && go run . ../../memberpb/member.proto

bench: build ## Go benchmarks, then redis-benchmark against sluice and redis-server
	$(GO) test -run '^$$' -bench . -benchmem ./...
	./scripts/bench.sh

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

lint: ## gofmt check and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed: make fmt'; exit 1)
	$(GO) vet ./...
