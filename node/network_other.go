//go:build !linux

package node

import (
	"fmt"
	"net"
	"runtime"

	"github.com/gompj/gompj/device"
)

// NetworkMissing says why this build has no device between node processes, or nil when it has one (`gompj info`).
// The network device, netdev, is built on epoll and runs on Linux alone.
func NetworkMissing() error {
	return fmt.Errorf("the network device between node processes (netdev, epoll over TCP) needs Linux, and this "+
		"is %s: run the job on one box (gompj run -np N, without -nodes), or start its node processes on Linux "+
		"hosts", runtime.GOOS)
}

// openNetwork refuses (see NetworkMissing). The job's other nodes hear of it through the coordinator, so the whole
// job ends at once with this reason. This file and network_linux.go are the one place where the operating system
// decides which device a multi-node job gets.
func openNetwork(cfg Config, layout Layout, addrs []string, sink device.Sink, ln net.Listener) (network, error) {
	return nil, NetworkMissing()
}
