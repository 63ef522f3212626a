//go:build linux

package node

import (
	"fmt"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/netdev"
)

func init() {
	devices.add(deviceEntry{name: DevTCP, summary: "other hosts: netdev, epoll over TCP", open: openTCP})
}

// openTCP opens netdev on GOMPJ_LISTEN, or on the interface that routes to the coordinator.
func openTCP(s *openSpec) (device.Transport, error) {
	cfg := s.cfg
	laddr, err := listenAddress(cfg)
	if err != nil {
		return nil, err
	}
	d, err := netdev.Open(netdev.Config{Node: cfg.NodeID, Nodes: cfg.Nodes, Ranks: cfg.Ranks, NodeOf: s.layout.NodeOf,
		Secret: cfg.Secret, Listen: laddr, Stripes: cfg.Stripes, Lazy: cfg.Lazy, EagerLimit: cfg.NetEagerLimit,
		UnexpectedLimit: cfg.UnexpectedLimit, BusyPoll: cfg.BusyPoll, ConnectTimeout: cfg.Timeout})
	if err != nil {
		return nil, fmt.Errorf("network listener: %w", err)
	}
	return d, nil
}
