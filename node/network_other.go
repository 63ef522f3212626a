//go:build !linux

package node

import (
	"fmt"
	"runtime"
)

// NetworkMissing says why this build has no device between node processes, or nil when it has one (`gompj info`).
// The network device, netdev, is built on epoll, and the shared-memory device on memfd and CMA: both run on Linux
// alone, so this build registers neither (this file and network_linux.go are the one place where the operating
// system decides which devices a multi-node job may get).
func NetworkMissing() error {
	return fmt.Errorf("the network device between node processes (netdev, epoll over TCP) needs Linux, and this "+
		"is %s: run the job on one box (gompj run -np N, without -nodes), or start its node processes on Linux "+
		"hosts", runtime.GOOS)
}
