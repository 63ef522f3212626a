#!/usr/bin/env bash
# The project's test command (the README's quick start). .ci/run installs what the tests need, then calls this.
set -euo pipefail
cd "$(dirname "$0")"

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted"
	exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck (pinned)"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Single-box runs work on every OS Go runs on; the network device (netdev, epoll) is Linux's alone.
for target in darwin/arm64 darwin/amd64 windows/amd64 freebsd/amd64; do
	echo "== cross-build and vet: $target"
	GOOS=${target%/*} GOARCH=${target#*/} go build ./...
	GOOS=${target%/*} GOARCH=${target#*/} go vet ./...
done

# gotest runs go test with its arguments. On failure it ends with a digest, since CI keeps only the tail of the
# output and a timed-out package's tail is some idle goroutine's stack: which tests were running, which failed, and
# the stacks that pass through test files (the waits that hung).
gotest() {
	local out rc=0
	out=$(mktemp)
	go test "$@" 2>&1 | tee "$out" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "== digest of the failed go test $* (stacks through test files, then what was running and what failed)"
		awk '/^goroutine [0-9]+ /{if (keep) printf "%s", blk; blk=""; keep=0} {blk=blk $0 "\n"} /_test\.go:|devicetest\//{keep=1} END{if (keep) printf "%s", blk}' \
			"$out" | grep -v -E '^\s+/usr/local/go/src/' | head -80
		grep -E -A4 'running tests:' "$out" | head -12 || true
		grep -E '^(\s*--- FAIL|FAIL|panic:)' "$out" | head -20 || true
	fi
	rm -f "$out"
	return "$rc"
}

echo "== race detector over the concurrent packages"
# The detector sleeps 1 s as a process exits (atexit_sleep_ms, for other goroutines to finish a report), and these
# tests start hundreds of processes, each waited for. A race still fails its test: the detector's exit status is
# checked. (The harness cuts it the same way for its node processes when GORACE does not set it.)
case "${GORACE:-}" in
*atexit_sleep_ms*) ;;
*) export GORACE="${GORACE:+$GORACE }atexit_sleep_ms=20" ;;
esac
gotest -race -short -count=1 -timeout 10m . ./queues/... ./ranks/... ./node/... ./netdev/... ./collectives/... ./nbc/... ./device/... ./rdma/...

echo "== full suite"
gotest -count=1 -timeout 15m ./...

echo "== ofi: the rdma device over libfabric (-tags ofi, cgo; node processes talk through tcp;ofi_rxm)"
if [ ! -f /usr/include/rdma/fabric.h ] && ! pkg-config --exists libfabric 2>/dev/null; then
	# As the multi-host tests: missing libfabric fails under CI (which installs it), else skips and says so.
	echo "libfabric's headers are missing: apt-get install libfabric-dev (.ci/run does)"
	if [ "${CI:-}" = true ]; then exit 1; fi
	echo "skipped"
else
	go vet -tags ofi ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags ofi ./rdma/ofi/... ./node/... ./cmd/gompj/... ./internal/harness/...
	gotest -race -short -tags ofi -count=1 -timeout 10m ./rdma/ofi/
	# The point-to-point suite, the collectives (and two sizes of their matrix) and NPB class S in the harness's
	# "ofi" mode; cmd/gompj: info, a job, a killed node process, and network namespaces.
	gotest -short -tags ofi -count=1 -timeout 10m -run '/^(ofi|np3|np8)$/^ofi$' .
	gotest -tags ofi -count=1 -timeout 10m -run 'TestModesClassS/.*/^ofi$' ./npb/
	gotest -tags ofi -count=1 -timeout 10m -run 'TestOFI|TestKillNodeAbortsJobOFI|TestNetnsOFI' ./cmd/gompj/
fi
