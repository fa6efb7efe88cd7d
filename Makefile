# fleetdns: CoreDNS with k8scrd, localtargets, gslb and splitdns.
#
#   make run    build, then serve Corefile.example on 127.0.0.1:1053 (no cluster needed)
#   make test   install what the tests need (Debian packages, kube-apiserver,
#               etcd: cached under $(FLEETDNS_CACHE)), then run every test

GO            ?= go
BIN           := bin/coredns
FLEETDNS_CACHE ?= /var/cache/fleetdns
export FLEETDNS_CACHE
# The build's identity (internal/version; the commit is also CoreDNS's own
# revision): `coredns -version`, coredns_build_info, coredns_fleetdns_build_info
# and the image's labels. VERSION is the nearest tag's describe, else
# 0.0.0-<commit>; SOURCE_DATE_EPOCH (the commit's time) fixes the image's times.
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null | sed -e 's/^v\([0-9]\)/\1/' -e '/^[0-9][0-9]*\./!s/^/0.0.0-/')
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
LDFLAGS := -s -w -X github.com/fleetdns/fleetdns/internal/version.Version=$(VERSION) \
	-X github.com/fleetdns/fleetdns/internal/version.Commit=$(COMMIT) \
	-X github.com/coredns/coredns/coremain.GitCommit=$(COMMIT)
# The same flags the Dockerfile and cmd/fleetdns-image use (ociimage.LDFlags):
# a static, stripped binary with its identity stamped in.
GOBUILD_FLAGS := -trimpath -ldflags "$(LDFLAGS)"
export CGO_ENABLED = 0
export GOTOOLCHAIN = local

.PHONY: all build image image-test run test deps unit timing e2e generate vet lint dupl clean bench bench-smoke bench-compare bench-instr fuzz soak

all: build

build:
	$(GO) build $(GOBUILD_FLAGS) -o $(BIN) ./cmd/coredns

# image: the OCI image (amd64 and arm64) as an image layout in $(IMAGE),
# without a container daemon (cmd/fleetdns-image, go-containerregistry).
# image-test: unpack it and run it under crun (test/image; root).
IMAGE := bin/image
image:
	$(GO) run ./cmd/fleetdns-image -out $(IMAGE) -version $(VERSION) -commit $(COMMIT) -epoch $(SOURCE_DATE_EPOCH)

image-test: image
	FLEETDNS_IMAGE=$(CURDIR)/$(IMAGE) FLEETDNS_REQUIRE_ALL=1 $(GO) test -count=1 -v ./test/image

generate:
	cd cmd/coredns && $(GO) generate .

# run checks for dig (the README's next command) and says where it comes
# from when it is missing; the server starts either way.
run: build
	@command -v dig >/dev/null 2>&1 || echo "make run: dig is not installed; to query this server install it with: sudo apt-get install bind9-dnsutils" >&2
	./$(BIN) -conf Corefile.example

# deps installs Debian packages and builds kube-apiserver/kubectl/etcd once
# (cached outside the clone); its last line of output is the binaries' folder.
deps:
	scripts/test-deps.sh

vet:
	$(GO) vet ./...

# lint: gofmt, then staticcheck at a pinned version, through go run so that
# nothing needs installing (the first run downloads and builds it; later ones
# reuse both caches).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@unformatted=$$(gofmt -l cmd internal plugin test); if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...

# dupl: the number of copies of code (clone groups of at least DUPL_TOKENS
# tokens) in plugin/, internal/ and test/ (the tests' helpers belong in
# test/harness and internal/testkit once), by a pinned dupl (not in
# `make test`: a count to compare, not a gate). The same go run without the
# tail lists them.
DUPL := github.com/mibk/dupl@v1.0.0
DUPL_TOKENS ?= 50
dupl:
	@$(GO) run $(DUPL) -t $(DUPL_TOKENS) plugin internal test | tail -1

# unit: every package's own tests under the race detector (cgo is needed for
# -race); a test that lacks a part it needs fails (testkit.Missing), never skips.
unit:
	CGO_ENABLED=1 FLEETDNS_REQUIRE_ALL=1 $(GO) test -race -count=1 ./cmd/... ./internal/... ./plugin/...

# timing: the unit tests that bound a latency, without -race (under it they
# check what happens, not how fast: docs/architecture.md, "Tests"). The list
# is every test whose body reads testkit.Race (scripts/timingtests), so a
# renamed test stays in it; finding none fails.
timing:
	@pattern=$$($(GO) run ./scripts/timingtests plugin internal) && echo "timing: -run '$$pattern'" && \
		$(GO) test -count=1 -run "$$pattern" $(TIMING_BENCH) ./plugin/... ./internal/...

# e2e: real processes, real sockets, a real kube-apiserver; no -race so that
# timing-sensitive tests do not flake on two cores. scripts/e2e.sh runs them
# in a network namespace with only loopback (FLEETDNS_NETNS=0: without).
#
# go test starts the packages in the order it is given them, two at a time
# on two cores: E2E_FIRST, the longest (half a minute to three each in CI), go first so
# that none of them starts last and runs alone; ./test/... adds the rest,
# each once.
E2E_FIRST := ./test/k8scrd ./test/gslb ./test/deploy ./test/reliability ./test/dnssec ./test/hostile ./test/bounds ./test/splitdns
e2e: build image
	FLEETDNS_K8S_BIN=$$(scripts/test-deps.sh) FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_IMAGE=$(CURDIR)/$(IMAGE) FLEETDNS_REQUIRE_ALL=1 \
		scripts/e2e.sh -count=1 -timeout 40m $(E2E_FIRST) ./test/...

# In `make test` the plugins' Go benchmarks (once each, bench-smoke's second
# half) run in timing's go test: one link of the plugins' test binaries
# (links are not cached) serves both.
BENCH_ONCE := -bench . -benchtime 1x
test: TIMING_BENCH = $(BENCH_ONCE)
test: BENCH_GO = no
test: deps vet lint unit timing e2e bench-smoke

# bench: every side-by-side comparison (about an hour; not in CI). Tables go
# to stdout and are appended to $(BENCH_OUT); BENCHMARKS.md quotes them. The
# gslb benchmark fails when a strategy misses its goal; the rest still runs.
BENCH_OUT ?= /tmp/fleetdns-bench.md
bench: build
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 10000 -rounds 5 -seconds 10 -resperf 250000 -out $(BENCH_OUT)
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 100000 -rounds 3 -seconds 10 -out $(BENCH_OUT)
	$(GO) run ./test/bench/splitdns -coredns $(CURDIR)/$(BIN) -routes 1,10,1000 -rounds 7 -seconds 6 -out $(BENCH_OUT)
	$(GO) run ./test/bench/dnsdist -coredns $(CURDIR)/$(BIN) -routes 1,1000 -rounds 5 -seconds 10 -out $(BENCH_OUT)
	-FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_BENCH_OUT=$(BENCH_OUT) test/gslb/bench.sh
	FLEETDNS_BENCH=1 FLEETDNS_K8S_BIN=$$(scripts/test-deps.sh) FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_BENCH_OUT=$(BENCH_OUT) \
		$(GO) test -count=1 -v -timeout 60m ./test/bench/scale
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench . -benchmem -count 5 ./plugin/... | tee -a $(BENCH_OUT)
	$(GO) run ./test/bench/instr -coredns $(CURDIR)/$(BIN) -out $(BENCH_OUT)

# bench-compare: the plugins' Go benchmarks at BASE (default: the merge base
# with main) against the work tree, alternating, compared with benchstat.
# COUNT, BENCHTIME, BENCH and PKGS narrow it, e.g.
#   make bench-compare BASE=HEAD~1 PKGS=./plugin/k8scrd BENCH=ServeDNS COUNT=20
bench-compare:
	COUNT=$(or $(COUNT),10) BENCHTIME=$(or $(BENCHTIME),0.3s) BENCH=$(or $(BENCH),.) BASE=$(BASE) scripts/bench-compare.sh $(PKGS)

# bench-smoke: the same harness for a few seconds, to show it still runs.
# It runs in `make test` (CI), with every Go benchmark once, so that the
# benchmark code keeps working.
bench-smoke: build
	$(GO) run ./test/bench/runner -coredns $(CURDIR)/$(BIN) -records 1000 -rounds 1 -seconds 1 -resperf 20000 -ramp 2
	$(if $(filter no,$(BENCH_GO)),,$(GO) test -run '^$$' $(BENCH_ONCE) ./plugin/...)

# bench-instr: instructions per query (callgrind Ir) of k8scrd/file/hosts,
# gslb/k8scrd and splitdns/forward, each server under valgrind (minutes;
# not in CI). INSTR_FLAGS=-quick for a short run.
INSTR_FLAGS ?=
bench-instr: build
	$(GO) run ./test/bench/instr -coredns $(CURDIR)/$(BIN) -out $(BENCH_OUT) $(INSTR_FLAGS)

# fuzz: every fuzz target of the plugins in turn, one `go test -fuzz` each,
# FUZZTIME each (not in CI; the seeds in testdata/fuzz run in unit). A crash
# is written to the package's testdata/fuzz/<FuzzName>/: commit it with the fix.
FUZZTIME ?= 30s
fuzz:
	@set -e; for f in plugin/*/fuzz_test.go; do \
		pkg=./$$(dirname $$f); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$pkg $$name ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel $(FUZZPARALLEL) $$pkg; \
		done; \
	done
FUZZPARALLEL ?= 2

# soak: the built binary for SOAK_DURATION at half the measured maximum
# query rate (or SOAK_QPS), with DNSEndpoints created and deleted all along
# and a gslb peer flapping; every answer is checked (not in CI; see RELIABILITY.md).
SOAK_DURATION ?= 10m
SOAK_QPS ?= 0
soak: build
	FLEETDNS_COREDNS=$(CURDIR)/$(BIN) FLEETDNS_SOAK_DURATION=$(SOAK_DURATION) FLEETDNS_SOAK_QPS=$(SOAK_QPS) \
		$(GO) test -count=1 -timeout 3h -run '^TestSoak$$' -v ./test/reliability

clean:
	rm -rf bin
