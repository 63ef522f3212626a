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

echo "== race detector over the concurrent packages"
go test -race -short -count=1 -timeout 10m . ./queues/... ./ranks/... ./node/... ./netdev/... ./collectives/... ./nbc/... ./device/... ./rdma/...

echo "== full suite"
go test -count=1 -timeout 15m ./...
