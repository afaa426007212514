# depinchain build, test and demo targets. The README's two commands are
# `make demo` and `make test`; everything else is for developers.

SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -ec

GO        ?= go
BUILD_DIR ?= $(CURDIR)/build
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# go-nvml's header marks NVML functions deprecated, and cgo's generated wrappers for them
# make gcc print about 30 -Wdeprecated-declarations warnings on a cold build. They say
# nothing about this code, so every target that compiles passes gcc the flag that hides
# them, after whatever CGO_CFLAGS the user set (or Go's default, `-O2 -g`).
ifeq ($(origin CGO_CFLAGS),undefined)
CGO_CFLAGS := $(shell $(GO) env CGO_CFLAGS)
endif
override CGO_CFLAGS += -Wno-deprecated-declarations
export CGO_CFLAGS
LDFLAGS   := -X github.com/cosmos/cosmos-sdk/version.Name=depinchain \
             -X github.com/cosmos/cosmos-sdk/version.AppName=depinchaind \
             -X github.com/cosmos/cosmos-sdk/version.Version=$(VERSION)

# Pinned generator versions (see ../shared/ENVIRONMENT.md): installed with `go install`.
BUF_VERSION      := v1.75.0
GOGOPROTO_VERSION := v1.7.2
GATEWAY_VERSION  := v1.16.0
# The sidecar's status API (proto/depinchain/provider) is plain google protobuf:
# protoc-gen-go at go.mod's google.golang.org/protobuf version, protoc-gen-go-grpc,
# and grpc-gateway v2, installed as protoc-gen-grpc-gateway-v2 so it does not
# replace v1's protoc-gen-grpc-gateway, which the chain's gogo protos need.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
GATEWAY_V2_VERSION         := v2.33.0

# Fuzz targets run briefly in `make test`: package, target name and budget. Budgets are
# execution counts, each about 10 s of fuzzing on two loaded cores: a count budget never
# hits the fuzz engine's end-of-run `context deadline exceeded` that duration budgets
# can (go.dev/issue/75804, see scripts/fuzz.sh). FUZZ_TIME, when set, replaces every
# budget (e.g. FUZZ_TIME=200000x, or FUZZ_TIME=60s for a longer run by the clock).
FUZZ_TARGETS := \
	./x/market/types:FuzzParseJobSpecYAML:60000x \
	./x/market/types:FuzzJobSpecValidate:25000x \
	./x/staking_ext/keeper:FuzzValidateRegisterProvider:6000x \
	./pkg/merkle:FuzzVerifyInclusion:300000x \
	./pkg/merkle:FuzzStreamRoot:100000x \
	./pkg/exact:FuzzDecode:600000x
FUZZ_TIME ?=

.PHONY: all build build-prev install deps test test-unit test-e2e test-fuzz test-long lint bench demo demo-fraud demo-together \
        proto-tools proto-deps proto-gen proto-check clean

all: build

## build: compile depinchaind and the provider sidecar depinprovider into build/
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/depinchaind ./cmd/depinchaind
	$(GO) build -ldflags '-X main.Version=$(VERSION)' -o $(BUILD_DIR)/depinprovider ./provider/cmd/depinprovider

## build-prev: the previous release's depinchaind (-tags prev_release, see internal/release) for the upgrade test
build-prev:
	$(GO) build -tags prev_release -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/depinchaind-prev ./cmd/depinchaind

## build-static: a statically linked depinchaind (build/depinchaind-static) that a FROM-scratch
##               image can run, for the Docker partition tests. It links the same compiled packages
##               as `build` (glibc linked in; no cgo code of ours needs it), so it costs a link, not
##               the second full compile CGO_ENABLED=0 would (which also works: see docs/localnet.md).
##               ld's notes that glibc's getaddrinfo/getpwuid_r/... need glibc's shared NSS modules
##               at run time are expected (the nodes look up no names through glibc: Go's own
##               resolver serves them) and filtered out by scripts/static-ld-filter.awk, which
##               lets every other line through. (-tags netgo,osusergo would drop those calls, but
##               a different tag set recompiles every package: minutes, not a link.)
.PHONY: build-static
build-static:
	$(GO) build -ldflags '$(LDFLAGS) -linkmode external -extldflags -static' -o $(BUILD_DIR)/depinchaind-static ./cmd/depinchaind 2>&1 \
		| awk -f scripts/static-ld-filter.awk >&2

## install: install depinchaind and depinprovider into GOBIN
install:
	$(GO) install -ldflags '$(LDFLAGS)' ./cmd/depinchaind
	$(GO) install -ldflags '-X main.Version=$(VERSION)' ./provider/cmd/depinprovider

## deps: the Debian packages tests, benchmarks and the demo need (python3-torch, libopenblas0-pthread, libjs-chart.js, chromium,
##       fortunes, prometheus for promtool), installed with apt-get when one is missing; a dpkg query when none is
deps:
	@./scripts/deps.sh

## test: everything CI runs: lint, generated-code check, unit, fuzz (briefly) and end-to-end tests
test: deps lint proto-check build test-unit test-fuzz test-e2e

# Tests that start nodes share the binary `build` made rather than each building their own.
test-unit: deps build
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider $(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e /cmd/depinchaind -e /provider/cmd/depinprovider)

## test-e2e: drive the real depinchaind binary through CLI, gRPC and REST
##           (the multi-validator fault tests included; the Docker partition tests skip without an engine),
##           then the sidecars' end-to-end tests (real nodes and several depinprovider processes, the
##           longest package: its own timeout, each test's time printed by tools/testtimes and, last,
##           each failed test's own t.Error/t.Fatal lines)
test-e2e: build build-prev build-static
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINCHAIND_PREV_BINARY=$(BUILD_DIR)/depinchaind-prev \
	DEPINCHAIND_STATIC_BINARY=$(BUILD_DIR)/depinchaind-static DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) test -count=1 -timeout 30m -v ./cmd/depinchaind/...
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) test -count=1 -timeout 45m -json ./provider/cmd/depinprovider/ | $(GO) run ./tools/testtimes

## test-fuzz: every fuzz target for its budget (FUZZ_TARGETS; FUZZ_TIME overrides them all)
test-fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg name budget <<< "$$t"; budget=$(if $(FUZZ_TIME),$(FUZZ_TIME),$$budget); \
		echo "fuzz $$name ($$pkg) for $$budget"; \
		GO=$(GO) ./scripts/fuzz.sh "$$pkg" "$$name" "$$budget"; \
	done

## torch-image: the exact transformer's PyTorch trainer (pkg/exact/torch) as a Docker image built from
##              Debian packages (debootstrap minbase + python3-torch + OpenBLAS, `docker import`), tagged
##              depinchain/exact-torch:<content hash>; prints the digest a container job pins. Needs root and
##              a Docker Engine; about 6 min cold (downloads ~270 MB of .debs, cached in build/torch-image),
##              under a second when the image exists. See docs/torch-image.md.
.PHONY: torch-image
torch-image:
	BUILD_DIR=$(BUILD_DIR) ./scripts/torch-image.sh

## test-long: long soak and simulation runs (not part of CI), the torch image's tests (docs/torch-image.md),
##            whose first run builds the image: about 6 min, as root, and every case of the tile-dispute
##            e2e table (TestTileDisputeEveryKind: nine games on real binaries, 6–10 min on 2 cores)
test-long:
	$(GO) test -count=1 -timeout 2h -tags long ./...

## test-sim-long: the app simulation at length (full run with invariants, determinism, import/export);
## `go test ./app/` runs the same tests short. SIM_SEEDS seeds of SIM_BLOCKS blocks of about SIM_BLOCK_SIZE operations.
SIM_BLOCKS     ?= 500
SIM_BLOCK_SIZE ?= 50
SIM_SEEDS      ?= 4
.PHONY: test-sim-long
test-sim-long:
	$(GO) test -count=1 -timeout 8h -v -run 'TestFullAppSimulation|TestAppStateDeterminism|TestAppImportExport' ./app/ \
		-NumBlocks=$(SIM_BLOCKS) -BlockSize=$(SIM_BLOCK_SIZE) -NumSeeds=$(SIM_SEEDS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\(\.gw\)\?\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench: benchmarks whose results are ratios against a baseline measured in the same run,
##        then the load test's table (market vs bank throughput, block times, gas per message)
LOADTEST_FLAGS ?= -duration 20s
bench: deps build
	@mkdir -p $(BUILD_DIR)
	$(GO) test -run '^$$' -bench 'BenchmarkEndBlocker' -benchtime 200x -count 3 ./x/market/keeper/ | tee $(BUILD_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'BenchmarkDispute|BenchmarkAttackEconomics|BenchmarkAuditOverhead' -benchtime 1x ./x/verify/keeper/ | tee -a $(BUILD_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'VerifyStorageProof' ./x/shardregistry/keeper/ | tee -a $(BUILD_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'BuildVsSha256sum' -benchtime 3x ./pkg/manifest/ | tee -a $(BUILD_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'HashState' -benchtime 3x ./provider/checkpoint/ | tee -a $(BUILD_DIR)/bench.txt
	@# Custody: Reed-Solomon 4+2 and the pieces' Merkle roots of a 1 GiB state ÷ openssl dgst -sha256 (CUSTODY_BENCH_BYTES=8589934592 for 8 GiB),
	@# and the peak RSS of a holder's repair of one piece of that state against the state's size (rss/state).
	$(GO) test -run '^$$' -bench 'CustodyVsOpenSSL|CustodyRepair' -benchtime 1x ./pkg/custody/ | tee -a $(BUILD_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'DiLoCoBandwidth|DiLoCoQuality' -benchtime 1x -timeout 90m ./pkg/diloco/ | tee -a $(BUILD_DIR)/bench.txt
	@# Phases 2–3 of a dispute over a real step of four model sizes up to 101 M parameters (x/verify/README.md's table).
	$(GO) test -run '^$$' -bench 'BenchmarkTileDispute' -benchtime 1x -timeout 60m ./pkg/tiles/ | tee $(BUILD_DIR)/bench-tiles.txt
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) test -run '^$$' -bench 'BidLatency|Dispute1024Steps' -benchtime 3x -timeout 30m ./provider/cmd/depinprovider/ | tee -a $(BUILD_DIR)/bench.txt
	@# Training together: the round barrier's share of three workers' time at 24 one-second steps a round, one worker 1.5x slower, split by cause (docs/training-together.md).
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) test -run '^$$' -bench 'RoundBarrier' -benchtime 1x -timeout 20m ./provider/cmd/depinprovider/ | tee -a $(BUILD_DIR)/bench.txt
	$(GO) run ./tools/benchratio $(BUILD_DIR)/bench.txt
	@# Resume after the trainer's loss (docs/storage-role.md): the job's reopening to the new trainer's first step, 260 MiB state, vs a local read+hash of it.
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) test -run '^$$' -bench 'ResumeFromCustody' -benchtime 1x -timeout 30m ./provider/cmd/depinprovider/ | tee $(BUILD_DIR)/bench-resume.txt
	$(GO) run ./tools/benchratio $(BUILD_DIR)/bench-resume.txt
	@# The exact transformer against float32 PyTorch (docs/exact-arithmetic.md): speed and quality ratios.
	$(GO) run ./tools/exactbench | tee $(BUILD_DIR)/bench-exact.txt
	@# Market vs bank transactions on one real node (docs/loadtest.md); LOADTEST_FLAGS sizes the run.
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind $(GO) run ./tools/loadtest $(LOADTEST_FLAGS) | tee -a $(BUILD_DIR)/bench.txt

## demo: a local chain and the whole market flow, told as it happens: a transformer job trained on the fortunes dataset,
##       its verified losses and a sample of its text (KEEP=1 leaves it running)
demo: deps build
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider $(GO) run ./tools/demo $(if $(KEEP),-keep)

## demo-fraud: an honest provider, a cheating one and a verifier; the cheat is caught, slashed and the job resumes
demo-fraud: deps build
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider $(GO) run ./tools/demo -fraud $(if $(KEEP),-keep)

## demo-together: three GPU providers train one model together in rounds, three storage providers hold its files
demo-together: deps build
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider $(GO) run ./tools/demo -together $(if $(KEEP),-keep)

## localnet: four validators as separate processes (homes in .localnet/, fixed ports from 26600,
##           Prometheus on) and a provider sidecar, left running; see docs/localnet.md.
##           LOCALNET_FLAGS passes flags to `localnetctl up` (e.g. -base-port=0 -block-time=500ms).
## localnet-stop: stop them all. One validator: go run ./tools/localnetctl stop|kill|start <i>
.PHONY: localnet localnet-stop
localnet: build
	DEPINCHAIND_BINARY=$(BUILD_DIR)/depinchaind DEPINPROVIDER_BINARY=$(BUILD_DIR)/depinprovider \
		$(GO) run ./tools/localnetctl up $(LOCALNET_FLAGS)

localnet-stop:
	$(GO) run ./tools/localnetctl down

proto-tools:
	@test -x $(GOBIN)/buf || $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	@test -x $(GOBIN)/protoc-gen-gocosmos || $(GO) install github.com/cosmos/gogoproto/protoc-gen-gocosmos@$(GOGOPROTO_VERSION)
	@test -x $(GOBIN)/protoc-gen-grpc-gateway || $(GO) install github.com/grpc-ecosystem/grpc-gateway/protoc-gen-grpc-gateway@$(GATEWAY_VERSION)
	@test -x $(GOBIN)/protoc-gen-swagger || $(GO) install github.com/grpc-ecosystem/grpc-gateway/protoc-gen-swagger@$(GATEWAY_VERSION)
	@# protoc-gen-go and protoc-gen-go-grpc write their version into the generated code: reinstall on a mismatch.
	@test "$$($(GOBIN)/protoc-gen-go --version 2>/dev/null)" = "protoc-gen-go $(PROTOC_GEN_GO_VERSION)" || \
		$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@test "$$($(GOBIN)/protoc-gen-go-grpc --version 2>/dev/null)" = "protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC_VERSION:v%=%)" || \
		$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	@test -x $(GOBIN)/protoc-gen-grpc-gateway-v2 || { tmp=$$(mktemp -d) && \
		GOBIN=$$tmp $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GATEWAY_V2_VERSION) && \
		mv $$tmp/protoc-gen-grpc-gateway $(GOBIN)/protoc-gen-grpc-gateway-v2 && rm -rf $$tmp; }

proto-deps:
	./scripts/protodeps.sh

## proto-gen: regenerate Go code, gateways and docs/static/openapi.json from proto/
##            (and the sidecar's provider/status/v1 from proto/depinchain/provider)
proto-gen: proto-tools proto-deps
	PATH=$(GOBIN):$$PATH ./scripts/protocgen.sh

# What proto-gen writes. '*.pb.go' also matches the *_grpc.pb.go files.
GENERATED := '*.pb.go' '*.pb.gw.go' docs/static/openapi.json docs/static/provider-openapi.json

## proto-check: fail if the committed generated code differs from a fresh generation
proto-check: proto-gen
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated code is stale; run 'make proto-gen' and commit:"; \
		git status --porcelain -- $(GENERATED); exit 1; fi

clean:
	rm -rf $(BUILD_DIR) third_party .gen .demo

## gpu-check: on a machine with an NVIDIA GPU, the exact workload's PyTorch path on CUDA against Go's roots,
##            with speed ratios against float32 and bf16 PyTorch (the GPU host needs only python3 + torch:
##            copy build/exact-roots.json and pkg/exact/torch there and run the second command)
##            First, scripts/gpu-host-check.sh: the NVML inventory as the sidecar registers it (catalogue
##            names, memory classes, unknown GPUs) and the container runtime's GPU request; each part says
##            PASS, FAIL or SKIPPED with the reason (no driver, no Docker, no NVIDIA runtime, no CUDA).
##            For a GPU host without Go: `make gpu-check-build`, copy build/gpu-check there, run the script.
GPU_PYTHON ?= python3
GPU_CHECK_DIR := $(BUILD_DIR)/gpu-check
.PHONY: gpu-check gpu-check-build
gpu-check-build:
	@mkdir -p $(GPU_CHECK_DIR)
	$(GO) build -o $(GPU_CHECK_DIR)/depinprovider ./provider/cmd/depinprovider
	$(GO) test -c -o $(GPU_CHECK_DIR)/runtime.test ./provider/runtime
	CGO_ENABLED=0 $(GO) build -ldflags=-s -o $(GPU_CHECK_DIR)/trainer ./provider/runtime/testdata/trainer
	$(GO) run ./tools/exactroots -out $(GPU_CHECK_DIR)/exact-roots.json
gpu-check: gpu-check-build
	@status=0; ./scripts/gpu-host-check.sh $(GPU_CHECK_DIR) || status=1; \
	if $(GPU_PYTHON) -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then \
		$(GPU_PYTHON) pkg/exact/torch/gpu_check.py --expected $(GPU_CHECK_DIR)/exact-roots.json || status=1; \
	else \
		printf '%-34s %s\n' "exact transformer on CUDA" "SKIPPED: $(GPU_PYTHON) has no CUDA-enabled torch"; \
	fi; exit $$status

## vendor-chartjs: copy Chart.js (Debian's libjs-chart.js) and its copyright into the dashboard's
##                 embedded assets; run after a Debian upgrade of the package and commit the result
CHARTJS_DIR ?= /usr/share/javascript/chart.js
DASHBOARD_VENDOR := cmd/depinchaind/dashboard/assets/vendor
.PHONY: vendor-chartjs
vendor-chartjs: deps
	cp $(CHARTJS_DIR)/chart.min.js $(DASHBOARD_VENDOR)/chart.min.js
	cp /usr/share/doc/libjs-chart.js/copyright $(DASHBOARD_VENDOR)/chart.js.copyright
	dpkg-query -W -f='libjs-chart.js $${Version}\n' libjs-chart.js > $(DASHBOARD_VENDOR)/chart.js.version
	@test $$(stat -c %s $(DASHBOARD_VENDOR)/chart.min.js) -lt 1048576 || { echo "chart.min.js is over 1 MB"; exit 1; }
