# fleetdns: CoreDNS with k8scrd, localtargets, gslb and splitdns.
#
#   make run    build, then serve Corefile.example on 127.0.0.1:1053 (no cluster needed)
#   make test   install what the tests need (Debian packages, kube-apiserver,
#               etcd: cached under $(FLEETDNS_CACHE)), then run every test

GO            ?= go
BIN           := bin/coredns
FLEETDNS_CACHE ?= /var/cache/fleetdns
export FLEETDNS_CACHE
# The same flags the Dockerfile uses: a static binary.
GOBUILD_FLAGS := -trimpath -ldflags "-s -w"
export CGO_ENABLED = 0
export GOTOOLCHAIN = local

.PHONY: all build run test deps unit e2e generate vet clean bench bench-smoke

all: build

build:
	$(GO) build $(GOBUILD_FLAGS) -o $(BIN) ./cmd/coredns

generate:
	cd cmd/coredns && $(GO) generate .

run: build
	./$(BIN) -conf Corefile.example

# deps installs Debian packages and builds kube-apiserver/kubectl/etcd once
# (cached outside the clone); its last line of output is the binaries' folder.
deps:
	scripts/test-deps.sh

vet:
	$(GO) vet ./...

# unit: every package's own tests under the race detector (cgo is needed for -race).
unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./cmd/... ./internal/... ./plugin/...

# e2e: real processes, real sockets, a real kube-apiserver; no -race so that
# timing-sensitive tests do not flake on two cores.
e2e: build
	FLEETDNS_K8S_BIN=$$(scripts/test-deps.sh) FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_REQUIRE_ALL=1 \
		$(GO) test -count=1 -timeout 40m ./test/...

test: deps vet unit e2e

# bench: every side-by-side comparison (minutes; not in CI). Tables go to
# stdout and are appended to $(BENCH_OUT); BENCHMARKS.md quotes them.
BENCH_OUT ?= /tmp/fleetdns-bench.md
bench: build
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 10000 -rounds 5 -seconds 10 -out $(BENCH_OUT)
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 100000 -rounds 3 -seconds 10 -out $(BENCH_OUT)
	$(GO) run ./test/bench/splitdns -coredns $(CURDIR)/$(BIN) -routes 1,1000 -rounds 5 -seconds 10 -out $(BENCH_OUT)
	$(GO) run ./test/bench/dnsdist -coredns $(CURDIR)/$(BIN) -routes 1,1000 -rounds 5 -seconds 10 -out $(BENCH_OUT)
	FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_BENCH_OUT=$(BENCH_OUT) test/gslb/bench.sh
	FLEETDNS_BENCH=1 FLEETDNS_K8S_BIN=$$(scripts/test-deps.sh) FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_BENCH_OUT=$(BENCH_OUT) \
		$(GO) test -count=1 -v -timeout 60m ./test/bench/scale
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench . -benchmem -count 5 ./plugin/... | tee -a $(BENCH_OUT)

# bench-smoke: the same harness for a few seconds, to show it still runs.
bench-smoke: build
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 1000 -rounds 1 -seconds 2

clean:
	rm -rf bin
