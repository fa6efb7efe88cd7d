#!/bin/sh
# bench-compare.sh: the plugins' Go benchmarks before and after a change,
# compared with benchstat.
#
#   [BASE=rev] scripts/bench-compare.sh [PACKAGE...]
#
# BASE is a git revision (default: main's merge base with HEAD, or HEAD~1 on
# main itself); "after" is the work tree as it is, uncommitted edits included.
# PACKAGEs default to every plugin. Both test binaries are built first, then
# run alternately (base, head, base, ...) COUNT times (default 10) with
# -benchtime BENCHTIME (default 0.3s), so that a machine whose load drifts
# shifts both sides alike; benchstat prints the deltas and their p-values.
# BENCH selects benchmarks (default .). Output files stay in OUT (default a
# temporary folder), named base.txt and head.txt.
#
#   BASE=HEAD~1 COUNT=20 BENCH=ServeDNS scripts/bench-compare.sh ./plugin/k8scrd
set -eu
cd "$(dirname "$0")/.."

BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-0.3s}
BENCH=${BENCH:-.}

base=${BASE:-}
if [ -z "$base" ]; then
	base=$(git merge-base main HEAD)
	[ "$base" = "$(git rev-parse HEAD)" ] && base=HEAD~1
fi
base_rev=$(git rev-parse --verify "$base^{commit}")
pkgs=${*:-$(go list ./plugin/...)}

OUT=${OUT:-$(mktemp -d /tmp/fleetdns-bench-compare.XXXXXX)}
mkdir -p "$OUT"
tree=$(mktemp -d /tmp/fleetdns-bench-base.XXXXXX)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT INT TERM
git worktree add --detach -q "$tree" "$base_rev"

# Build each package's test binary at both revisions. CGO stays on where the
# machine has a C compiler: the benchmarks read CPU time per op through it
# on some packages.
n=0
for pkg in $pkgs; do
	rel=$(go list -f '{{.Dir}}' "$pkg")
	rel=${rel#"$(pwd)"/}
	n=$((n + 1))
	echo "$rel" >"$OUT/$n.dir"
	go test -c -o "$OUT/$n.head.test" "./$rel"
	if [ -d "$tree/$rel" ]; then
		(cd "$tree" && go test -c -o "$OUT/$n.base.test" "./$rel")
	fi
done
echo "base $(git rev-parse --short "$base_rev") vs head $(git rev-parse --short HEAD)$(git diff --quiet || echo '+edits'): $n packages, $COUNT alternating runs, -benchtime $BENCHTIME" >&2

: >"$OUT/base.txt"
: >"$OUT/head.txt"
i=0
while [ "$i" -lt "$COUNT" ]; do
	for side in base head; do
		for bin in "$OUT"/*."$side".test; do
			[ -e "$bin" ] || continue
			pkgdir=$(cat "${bin%."$side".test}.dir")
			# Run from the package's folder, as go test does (testdata). A
			# package with no benchmark matching BENCH prints none: grep's
			# status 1 then is no failure.
			(cd "$pkgdir" && "$bin" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
				-test.benchtime "$BENCHTIME" -test.count 1) | { grep -E '^(Benchmark|goos|goarch|pkg|cpu)' || [ $? -eq 1 ]; } >>"$OUT/$side.txt"
		done
	done
	i=$((i + 1))
done

go run "$BENCHSTAT" "base=$OUT/base.txt" "head=$OUT/head.txt"
echo "raw results: $OUT/base.txt $OUT/head.txt" >&2
