//go:build linux

package node

import (
	"fmt"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/netdev"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/shm"
)

// NetworkMissing says why this build has no device between node processes, or nil when it has one (`gompj info`).
func NetworkMissing() error { return nil }

// The devices of a Linux build: this file and network_other.go are the one place where the operating system
// decides which devices a multi-node job may get.
func init() {
	devices.add(deviceEntry{name: DevSHM, summary: "same host: node processes share memory (rdma over its shm provider)",
		open: openSHM, status: shmStatus})
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
		UnexpectedLimit: cfg.UnexpectedLimit, BusyPoll: cfg.BusyPoll, ConnectTimeout: cfg.Timeout,
		Congestion: cfg.TCPCongestion})
	if err != nil {
		return nil, fmt.Errorf("network listener: %w", err)
	}
	return d, nil
}

// shmStatus says how the host device moves large messages on this host: CMA, or through the rings and why.
func shmStatus(cfg Config) string {
	if ok, why := shm.CMA(cfg.NoCMA); !ok {
		return "large messages copied through the rings (CMA off: " + why + ")"
	}
	return "large messages in one copy (CMA, process_vm_readv/writev)"
}

// openSHM opens the rdma device over the shm provider: a shared segment and an abstract Unix socket.
func openSHM(s *openSpec) (device.Transport, error) {
	cfg := s.cfg
	ep, err := shm.Provider{Opts: shm.Options{NoCMA: cfg.NoCMA, ConnectTimeout: cfg.Timeout}}.Open(
		rdma.EndpointConfig{Node: cfg.NodeID, Nodes: cfg.Nodes, Secret: cfg.Secret})
	if err != nil {
		return nil, err
	}
	return rdma.New(ep, rdma.Config{Node: cfg.NodeID, Nodes: cfg.Nodes, Ranks: cfg.Ranks, NodeOf: s.layout.NodeOf,
		Name: DevSHM, UnexpectedLimit: cfg.UnexpectedLimit, BusyPoll: cfg.BusyPoll,
		RegCacheBytes: cfg.RegCacheBytes})
}
