//go:build linux

package node

import (
	"net"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/netdev"
)

// NetworkMissing says why this build has no device between node processes, or nil when it has one (`gompj info`).
func NetworkMissing() error { return nil }

// openNetwork opens this node's network device on ln: netdev, epoll over TCP. This file and network_other.go are
// the one place where the operating system decides which device a multi-node job gets.
func openNetwork(cfg Config, layout Layout, addrs []string, sink device.Sink, ln net.Listener) (network, error) {
	d, err := netdev.New(netdev.Config{Node: cfg.NodeID, Addrs: addrs, Ranks: cfg.Ranks, NodeOf: layout.NodeOf,
		Secret: cfg.Secret, Sink: sink, Listener: ln, Stripes: cfg.Stripes, Lazy: cfg.Lazy,
		EagerLimit: cfg.NetEagerLimit, UnexpectedLimit: cfg.UnexpectedLimit, BusyPoll: cfg.BusyPoll,
		ConnectTimeout: cfg.Timeout})
	if err != nil {
		return nil, err // not a nil *netdev.Device inside a non-nil interface
	}
	return d, nil
}
